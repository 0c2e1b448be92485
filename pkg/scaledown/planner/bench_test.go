package planner

import (
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const benchDriver = "gpu.example.com"

// benchWorld is nodes × 8 GPUs; with pods, each node runs one
// ReplicaSet pod holding one GPU (1/8 used): every node is a candidate
// and every removal must re-place a pod and re-allocate its claim.
func benchWorld(b *testing.B, nodes int, withPods bool) (*framework.Runner, world) {
	b.Helper()
	_, ctx := ktesting.NewTestContext(b)
	r, err := framework.New(klog.NewContext(ctx, klog.Background().V(0)), framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	objs := []any{builder.DeviceClass("gpu").Driver(benchDriver).Obj()}
	var w world
	for i := range nodes {
		name := fmt.Sprintf("n%04d", i)
		n := builder.Node(name).CPU("64").Memory("512Gi").Obj()
		slice := builder.ResourceSlice(name+"-gpu", name, benchDriver, name)
		for d := range 8 {
			slice.Devices(builder.Device(fmt.Sprintf("gpu-%d", d)))
		}
		objs = append(objs, n, slice.Obj())
		w.nodes = append(w.nodes, n)
		if !withPods {
			continue
		}
		pod := builder.Pod("app", "p-"+name).CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").
			ClaimFromTemplate("gpu", "one-gpu").ClaimStatus("gpu", "c-"+name).Node(name).Obj()
		claim := builder.Claim("app", "c-"+name).Request(builder.Request("gpu", "gpu")).OwnedByPod(pod, "gpu").
			Allocated(name, builder.AllocatedDevice("gpu", benchDriver, name, "gpu-0")).ReservedFor(pod).Obj()
		claim.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeExactCount
		claim.Spec.Devices.Requests[0].Exactly.Count = 1
		objs = append(objs, pod, claim)
		w.pods = append(w.pods, pod)
	}
	snapshottest.Load(b, r.Snapshot(), objs...)
	return r, w
}

// BenchmarkPlan is one scale-down pass over a cluster where every node is
// a candidate: empty nodes (utilization, eligibility, selection), and
// nodes each running one GPU pod (plus the simulation of up to 30
// removals, each pod placed again by the framework across the cluster).
//
//	go test ./pkg/scaledown/planner -run '^$' -bench BenchmarkPlan -benchmem -benchtime 3x
func BenchmarkPlan(b *testing.B) {
	for _, bc := range []struct {
		name     string
		nodes    int
		withPods bool
	}{
		{"1000x8gpu/empty", 1000, false},
		{"1000x8gpu/one-gpu-pod-each", 1000, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, w := benchWorld(b, bc.nodes, bc.withPods)
			p := New(r, Options{
				Thresholds:            eligibility.Thresholds{Utilization: 0.5, GPU: 0.5},
				Rules:                 drainability.Rules{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true},
				UnneededTime:          10 * time.Minute,
				MaxParallelism:        10,
				MaxNonEmptyCandidates: 30,
			})
			ctx := klog.NewContext(b.Context(), klog.Background().V(0))
			in := w.input(t0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				plan, err := p.Plan(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				want := bc.nodes
				if bc.withPods {
					want = 30 // the per-pass simulation limit
				}
				if len(plan.Unneeded) != want {
					b.Fatalf("%d unneeded, want %d", len(plan.Unneeded), want)
				}
			}
		})
	}
}
