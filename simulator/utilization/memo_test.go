package utilization

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A calculator that remembers gives a node's last device use back while
// the node's DeviceState is the one it was counted in, counts again when
// the slices or the allocations changed, never keeps a node whose pool
// has slices on another node, and forgets nodes no longer read.
func TestRemember(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	snap := snapshot.New(logger)
	memo := NewMemo()
	node := builder.Node("n1").CPU("8").Memory("32Gi").Obj()
	own, fresh := gpus("n1", 4), gpus("n1", 4)
	allocated := func(name string, devices ...string) *resourceapi.ResourceClaim {
		var results []resourceapi.DeviceRequestAllocationResult
		for _, d := range devices {
			results = append(results, builder.AllocatedDevice("gpu", gpu, "n1", d))
		}
		return builder.Claim("ns", name).Request(builder.Request("gpu", "gpu")).Allocated("n1", results...).Obj()
	}
	const sentinel = 0.999 // written into the memo after each pass: read back only if kept
	steps := []struct {
		name    string
		objs    []any
		want    float64
		kept    bool
		counted bool // the memo holds the node as of this pass
	}{
		{"first pass", []any{node, own, allocated("a", "gpu-0")}, 0.25, false, true},
		{"the same objects", []any{node, own, allocated("a", "gpu-0")}, 0.25, true, true},
		{"another claim, the same device", []any{node, own, allocated("b", "gpu-0")}, 0.25, true, true},
		{"one more device", []any{node, own, allocated("a", "gpu-0", "gpu-1")}, 0.5, false, true},
		{"an equal slice object", []any{node, fresh, allocated("a", "gpu-0", "gpu-1")}, 0.5, false, true},
		{"a pool with a slice on another node", []any{node, builder.Node("n2").Obj(), fresh,
			builder.ResourceSlice("n2-more", "n2", gpu, "n1").Devices(builder.Device("gpu-9")).Obj(), allocated("a", "gpu-0", "gpu-1")}, 0.5, false, false},
	}
	for _, s := range steps {
		if err := snap.Reset(); err != nil {
			t.Fatal(err)
		}
		snapshottest.Load(t, snap, s.objs...)
		calc, err := FromSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		calc.Remember(memo)
		ni, err := snap.NodeInfos().Get("n1")
		if err != nil {
			t.Fatal(err)
		}
		got := calc.Node(ni).DRA
		want := s.want
		if s.kept {
			want = sentinel
		}
		if got != want {
			t.Errorf("%s: device use %v, want %v (kept: %v)", s.name, got, want, s.kept)
		}
		u, ok := memo.uses["n1"]
		if ok = ok && u.read == memo.passes; ok != s.counted {
			t.Errorf("%s: memo holds n1: %v, want %v", s.name, ok, s.counted)
		}
		if ok {
			u.use = sentinel
			memo.uses["n1"] = u
		}
	}
	// Three passes that do not read n1 drop it.
	for range 3 {
		calc, err := FromSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		calc.Remember(memo)
	}
	if _, ok := memo.uses["n1"]; ok {
		t.Error("a node not read for three passes is still kept")
	}
}
