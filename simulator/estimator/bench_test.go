package estimator

import (
	"fmt"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// BenchmarkScaleFromZeroDRA is the upstream cluster autoscaler's
// BenchmarkRunOnceScaleUpDRA scenario (which takes 23.5 s and 10.7 GB per
// run on the reference machine): one group, template of one slice with 8
// GPUs, 4,000 pods each with its own one-GPU claim, 500 new nodes.
func BenchmarkScaleFromZeroDRA(b *testing.B) {
	for _, memo := range []bool{true, false} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			r, ctx, pods, tmpl := scaleFromZero(b, 4000)
			e := New(r, Options{DisableMemo: !memo})
			b.ReportAllocs()
			for b.Loop() {
				res, err := e.Estimate(ctx, pods, tmpl, "gpu")
				if err != nil {
					b.Fatal(err)
				}
				if res.NodeCount != 500 || res.Unplaced.Len() != 0 {
					b.Fatalf("got %d nodes, %d unplaced; want 500, 0", res.NodeCount, res.Unplaced.Len())
				}
			}
		})
	}
}

// BenchmarkEstimateAllGroups estimates every one of 50 groups for pending
// pods in 20 shapes, on a cluster of 1,000 8-GPU nodes with 20,000
// allocated claims. Two pod counts show the cost follows shapes × groups,
// not pods × groups.
func BenchmarkEstimateAllGroups(b *testing.B) {
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			r, ctx := bigCluster(b, 1000, 20)
			pods, objs := shapedPods(n, 20)
			snapshottest.Load(b, r.Snapshot(), objs...)
			groups := groupTemplates(50)
			e := New(r, Options{})
			// Building the cluster left garbage behind; collect it now
			// rather than bill the first estimate for it.
			runtime.GC()
			b.ReportAllocs()
			calls := 0
			cpu := cpuTime()
			for b.Loop() {
				calls = 0
				results, err := e.EstimateGroups(ctx, pods, groups)
				if err != nil {
					b.Fatal(err)
				}
				for g, res := range results {
					if res.Unplaced.Len() != 0 {
						b.Fatalf("group %d: %d pods unplaced", g, res.Unplaced.Len())
					}
					calls += res.FrameworkCalls
				}
			}
			b.ReportMetric(float64(calls), "framework-calls/op")
			// CPU time of the whole process (GC included) per estimate:
			// steadier than ns/op when other work shares the machine.
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime returns the user and system CPU time the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForkRevert forks the snapshot of a 1,000-node cluster with
// 20,000 allocated claims, adds a new node with its slice and a pod with
// an allocated claim, and reverts: the cost of one speculative step.
func BenchmarkForkRevert(b *testing.B) {
	r, _ := bigCluster(b, 1000, 20)
	s := r.Snapshot()
	tmpl := gpuTemplate(8, nil)
	pod := builder.Pod(ns, "probe").CPU("1").Claim("gpu", "probe").Obj()
	b.ReportAllocs()
	for b.Loop() {
		s.Fork()
		node, slices, _ := template.Instantiate(tmpl, "probe-node")
		if err := s.AddNode(node); err != nil {
			b.Fatal(err)
		}
		for _, sl := range slices {
			if err := s.SetResourceSlice(sl); err != nil {
				b.Fatal(err)
			}
		}
		claim := builder.Claim(ns, "probe").Request(builder.Request("gpu", "gpu")).
			Allocated("probe-node", builder.AllocatedDevice("gpu", gpuDriver, "probe-node", "gpu-0")).ReservedFor(pod).Obj()
		if err := s.SetResourceClaim(claim); err != nil {
			b.Fatal(err)
		}
		if err := s.AddPod(pod, "probe-node"); err != nil {
			b.Fatal(err)
		}
		if err := s.Revert(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilterTemplateNode runs one framework Filter pass (PreFilter
// included) for a pod with a one-GPU template claim on one instantiated
// template node, in the 1,000-node cluster, with and without the
// estimator's slice scoping.
func BenchmarkFilterTemplateNode(b *testing.B) {
	for _, scoped := range []bool{false, true} {
		b.Run(fmt.Sprintf("scoped=%v", scoped), func(b *testing.B) {
			r, ctx := bigCluster(b, 1000, 20)
			s := r.Snapshot()
			snapshottest.Load(b, s, builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
			s.Fork()
			if scoped {
				s.ScopeSlices([]string{"probe-node"})
				defer s.ScopeSlices(nil)
			}
			node, slices, _ := template.Instantiate(gpuTemplate(8, nil), "probe-node")
			snapshottest.Load(b, s, node)
			for _, sl := range slices {
				snapshottest.Load(b, s, sl)
			}
			pod := templatePods("probe", "one-gpu", "1", 1)[0]
			b.ReportAllocs()
			for b.Loop() {
				res, err := r.RunFilters(ctx, pod, []string{"probe-node"})
				if err != nil || !res[0].Fits {
					b.Fatalf("filter: %+v, %v", res, err)
				}
			}
		})
	}
}
