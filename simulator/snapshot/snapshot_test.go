package snapshot

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func newTestSnapshot(t testing.TB) *Snapshot {
	logger, _ := ktesting.NewTestContext(t)
	return New(logger)
}

func TestBadInputIsAnErrorNotAPanic(t *testing.T) {
	s := newTestSnapshot(t)
	mustOK(t, s.AddNode(builder.Node("n1").Obj()))
	mustOK(t, s.AddPod(builder.Pod("ns", "p").Obj(), "n1"))
	tests := map[string]error{
		"nil node":            s.AddNode(nil),
		"unnamed node":        s.AddNode(builder.Node("").Obj()),
		"duplicate node":      s.AddNode(builder.Node("n1").Obj()),
		"remove absent node":  s.RemoveNode("n9"),
		"nil pod":             s.AddPod(nil, "n1"),
		"pod without UID":     s.AddPod(builder.Pod("ns", "q").UID("").Obj(), "n1"),
		"pod on absent node":  s.AddPod(builder.Pod("ns", "q").Obj(), "n9"),
		"pod placed twice":    s.AddPod(builder.Pod("ns", "p").Obj(), "n1"),
		"placed pod pending":  s.AddPendingPod(builder.Pod("ns", "p").Obj()),
		"remove absent pod":   s.RemovePod("ns", "q"),
		"nil slice":           s.SetResourceSlice(nil),
		"nil claim":           s.SetResourceClaim(nil),
		"remove absent claim": s.RemoveResourceClaim("ns", "c"),
		"nil class":           s.SetDeviceClass(nil),
		"nil rule":            s.SetDeviceTaintRule(nil),
		"nil pod group":       s.SetPodGroup(nil),
		"nil workload":        s.SetWorkload(nil),
		"revert without fork": s.Revert(),
		"commit without fork": s.Commit(),
		"signal without allocation": s.ResourceClaims().SignalClaimPendingAllocation("uid",
			builder.Claim("ns", "c").Obj()),
	}
	for name, err := range tests {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestForkCopiesNodeInfoOnWrite(t *testing.T) {
	s := newTestSnapshot(t)
	mustOK(t, s.AddNode(builder.Node("n1").Obj()))
	mustOK(t, s.AddPod(builder.Pod("ns", "a").CPU("1").Obj(), "n1"))
	before, _ := s.Get("n1")

	s.Fork()
	mustOK(t, s.AddPod(builder.Pod("ns", "b").CPU("1").Obj(), "n1"))
	during, _ := s.Get("n1")
	if len(before.GetPods()) != 1 || len(during.GetPods()) != 2 {
		t.Fatalf("pods before %d during %d: a NodeInfo handed out before the fork changed", len(before.GetPods()), len(during.GetPods()))
	}
	s.Fork()
	mustOK(t, s.RemovePod("ns", "a"))
	mustOK(t, s.Commit()) // the removal now belongs to the outer fork
	if ni, _ := s.Get("n1"); len(ni.GetPods()) != 1 || len(during.GetPods()) != 2 {
		t.Fatal("commit into the outer fork lost or leaked a change")
	}
	mustOK(t, s.Revert())
	after, _ := s.Get("n1")
	if after != before || after.GetRequested().GetMilliCPU() != 1000 {
		t.Fatalf("after revert: got %v, want the original NodeInfo back", after)
	}
	mustOK(t, s.Reset())
	if l, _ := s.List(); len(l) != 0 {
		t.Fatal("Reset left nodes behind")
	}
	s.Fork()
	if err := s.Reset(); err == nil {
		t.Fatal("Reset with an open fork must fail")
	}
}

func TestNodeRemovalTakesPodsAndSlices(t *testing.T) {
	s := newTestSnapshot(t)
	mustOK(t, s.AddNode(builder.Node("n1").Obj()))
	mustOK(t, s.SetResourceSlice(builder.ResourceSlice("s1", "n1", "d", "n1").Obj()))
	mustOK(t, s.SetResourceSlice(builder.ResourceSlice("net", "", "d", "net").Obj()))
	mustOK(t, s.AddPendingPod(builder.Pod("ns", "p").PodGroup("g").Obj()))
	mustOK(t, s.AddPod(builder.Pod("ns", "p").PodGroup("g").Obj(), "n1"))
	if _, pending := s.PendingPod("ns", "p"); pending {
		t.Fatal("a placed pod is still pending")
	}
	mustOK(t, s.RemoveNode("n1"))
	slices, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	if len(slices) != 1 || slices[0].Name != "net" {
		t.Fatalf("slices after node removal: %v, want only the network slice", slices)
	}
	if _, err := s.PodGroupStates().Get("ns", "g"); err == nil {
		t.Fatal("the removed pod still counts in its group")
	}
}

// BenchmarkForkAddRevert measures one speculative placement at the size of
// the scenario: 1,000 nodes with 8 GPUs each, 8,000 allocated claims.
func BenchmarkForkAddRevert(b *testing.B) {
	s := benchCluster(b, 1000)
	pod := builder.Pod("ns", "probe").CPU("1").Obj()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Fork()
		if err := s.AddPod(pod, fmt.Sprintf("n%d", i%1000)); err != nil {
			b.Fatal(err)
		}
		if err := s.Revert(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGatherAllocatedState is what every DRA PreFilter pays.
func BenchmarkGatherAllocatedState(b *testing.B) {
	s := benchCluster(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if st, _ := s.ResourceClaims().GatherAllocatedState(); st.AllocatedDevices.Len() != 8000 {
			b.Fatalf("%d allocated devices", st.AllocatedDevices.Len())
		}
	}
}

func benchCluster(b *testing.B, nodes int) *Snapshot {
	s := newTestSnapshot(b)
	for n := range nodes {
		node := fmt.Sprintf("n%d", n)
		mustOK(b, s.AddNode(builder.Node(node).Obj()))
		sl := builder.ResourceSlice(node+"-gpus", node, "gpu.example.com", node)
		for g := range 8 {
			dev := fmt.Sprintf("gpu-%d", g)
			sl.Devices(builder.Device(dev))
			pod := builder.Pod("ns", fmt.Sprintf("%s-%s", node, dev)).CPU("1").Obj()
			mustOK(b, s.AddPod(pod, node))
			mustOK(b, s.SetResourceClaim(builder.Claim("ns", pod.Name).Request(builder.Request("gpu", "gpu")).
				Allocated(node, builder.AllocatedDevice("gpu", "gpu.example.com", node, dev)).ReservedFor(pod).Obj()))
		}
		mustOK(b, s.SetResourceSlice(sl.Obj()))
	}
	return s
}
