package utilization

import (
	"fmt"
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

// NodesAhead counts, side by side, what Node would count one node at a
// time: every node whose pools are its own is in the memo afterwards,
// with the use a calculator without a memo gives; a node
// whose pool has a slice elsewhere is not (nor is that elsewhere); a node already held in its
// state is not counted again. Enough nodes to split: run with -race.
func TestNodesAhead(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	snap := snapshot.New(logger)
	const nodes = 600
	var objs []any
	var names []string
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		names = append(names, name)
		objs = append(objs, builder.Node(name).CPU("8").Memory("32Gi").Obj(), gpus(name, 4))
		var results []resourceapi.DeviceRequestAllocationResult
		for d := range i % 5 {
			results = append(results, builder.AllocatedDevice("gpu", gpu, name, fmt.Sprintf("gpu-%d", d)))
		}
		if len(results) > 0 {
			objs = append(objs, builder.Claim("ns", "c-"+name).Request(builder.Request("gpu", "gpu")).Allocated(name, results...).Obj())
		}
	}
	// n0's pool has a slice on n1 too: neither is kept.
	objs = append(objs, builder.ResourceSlice("n1-more", "n1", gpu, "n0").Devices(builder.Device("gpu-9")).Obj())
	snapshottest.Load(t, snap, objs...)
	memo := NewMemo()
	for pass := range 2 {
		calc, err := FromSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		calc.Remember(memo)
		const sentinel = 0.999
		if pass == 1 {
			// Held in its state: not counted again.
			u := memo.uses["n7"]
			u.use = sentinel
			memo.uses["n7"] = u
		}
		calc.NodesAhead(names)
		plain, err := FromSnapshot(snap)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			_, held := memo.uses[name]
			if kept := name != "n0" && name != "n1"; held != kept {
				t.Fatalf("pass %d: node %s held %v, want %v", pass, name, held, kept)
			}
			ni, err := snap.NodeInfos().Get(name)
			if err != nil {
				t.Fatal(err)
			}
			want := plain.Node(ni).DRA
			if pass == 1 && name == "n7" {
				want = sentinel
			}
			if got := calc.Node(ni).DRA; got != want {
				t.Fatalf("pass %d: node %s device use %v, one at a time %v", pass, name, got, want)
			}
			if u := memo.uses[name]; held && u.read != memo.passes {
				t.Fatalf("pass %d: node %s last read in pass %d of %d", pass, name, u.read, memo.passes)
			}
		}
	}
}
