package fragmentation

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestNodeStranded(t *testing.T) {
	mem := CapacityResource(gpuDriver, "memory")
	devs := DevicesResource(gpuDriver)
	gi := float64(1 << 30)
	tests := []struct {
		name   string
		node   []any
		used   []string // templates placed on the node first
		shapes []string
		want   map[Resource][3]float64 // total, free, stranded
	}{
		{"5 of 7 slices used, 3-slice pods strand the 2 left", migNode("n1"), []string{"s5"}, []string{"s3"},
			map[Resource][3]float64{slicesRes: {7, 2, 2}}},
		{"5 of 7 slices used, 2-slice pods use them", migNode("n1"), []string{"s5"}, []string{"s2", "s3"},
			map[Resource][3]float64{slicesRes: {7, 2, 0}}},
		{"empty GPU packs 2+2+3 exactly", migNode("n1"), nil, []string{"s2", "s3"},
			map[Resource][3]float64{slicesRes: {7, 7, 0}}},
		{"empty GPU, 3-slice pods only: one slice stranded", migNode("n1"), nil, []string{"s3"},
			map[Resource][3]float64{slicesRes: {7, 7, 1}}},
		{"one slice used: the whole GPU is gone", migNode("n1"), []string{"s1"}, []string{"whole"},
			map[Resource][3]float64{slicesRes: {7, 6, 6}}},
		{"no shapes: all free capacity is stranded", migNode("n1"), []string{"s2"}, nil,
			map[Resource][3]float64{slicesRes: {7, 5, 5}}},
		{"consumable capacity: 10Gi of 80Gi is left after 20Gi shares", sharedNode("n1"), []string{"mem20", "mem20", "mem20"}, []string{"mem20"},
			map[Resource][3]float64{mem: {80 * gi, 20 * gi, 0}}},
		{"plain devices: a 3-GPU shape cannot use 2 free GPUs", plainNode("n1", 4), []string{"g2"}, []string{"g3"},
			map[Resource][3]float64{devs: {4, 2, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			load(t, r, tc.node, plainTemplates())
			for i, tmpl := range tc.used {
				place(t, ctx, r, fmt.Sprintf("used-%d", i), tmpl, "n1")
			}
			a := NewAnalyzer(r)
			depth := r.Snapshot().Depth()
			rep, err := a.Node(ctx, "n1", shapes(t, r, tc.shapes...))
			if err != nil {
				t.Fatal(err)
			}
			if r.Snapshot().Depth() != depth {
				t.Fatalf("snapshot left at depth %d", r.Snapshot().Depth())
			}
			for res, w := range tc.want {
				got := [3]float64{rep.Total[res], rep.Free[res], rep.Stranded[res]}
				if got != w {
					t.Errorf("%s: total, free, stranded = %v, want %v", res, got, w)
				}
			}
			// Asking again is answered from the memo.
			calls := a.Calls
			if _, err := a.Node(ctx, "n1", shapes(t, r, tc.shapes...)); err != nil {
				t.Fatal(err)
			}
			if a.Calls != calls {
				t.Errorf("second analysis made %d framework calls, want 0", a.Calls-calls)
			}
		})
	}
}

// Nodes of one layout in the same state share one analysis.
func TestNodeMemoAcrossNodes(t *testing.T) {
	r, ctx := newRunner(t)
	load(t, r, migNode("n1"), migNode("n2"))
	place(t, ctx, r, "a", "s4", "n1")
	place(t, ctx, r, "b", "s4", "n2")
	a := NewAnalyzer(r)
	sh := shapes(t, r, "s2", "s3")
	if _, err := a.Node(ctx, "n1", sh); err != nil {
		t.Fatal(err)
	}
	calls := a.Calls
	rep, err := a.Node(ctx, "n2", sh)
	if err != nil {
		t.Fatal(err)
	}
	if a.Calls != calls {
		t.Errorf("twin node cost %d framework calls, want 0", a.Calls-calls)
	}
	if rep.Free[slicesRes] != 3 || rep.Stranded[slicesRes] != 0 {
		t.Errorf("n2 free %v stranded %v, want 3 and 0", rep.Free, rep.Stranded)
	}
}

func TestRank(t *testing.T) {
	tests := []struct {
		name     string
		pod      string
		shapes   []string
		alt      bool
		wantHead string
	}{
		// n1 has 3 free slices, n2 is untouched.
		{"2 slices go where they strand nothing", "s2", []string{"s2", "s3"}, false, "n2"},
		{"3 slices fill the partly used GPU", "s3", []string{"s2", "s3"}, false, "n1"},
		{"whole GPU only fits the untouched one", "whole", []string{"s2"}, false, "n2"},
		{"prioritized list, scheduler's preference: the first alternative", "whole-or-2", []string{"s2"}, true, "n2"},
		{"prioritized list, fragmentation only: fill the partly used GPU", "whole-or-2", []string{"s2"}, false, "n1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			load(t, r, migNode("n1"), migNode("n2"))
			place(t, ctx, r, "used", "s4", "n1")
			a := NewAnalyzer(r)
			pod := podFor("p", tc.pod)
			ranked, choices, err := a.Rank(ctx, pod, []string{"n1", "n2"}, RankOptions{Shapes: shapes(t, r, tc.shapes...), AlternativeFirst: tc.alt})
			if err != nil {
				t.Fatal(err)
			}
			if len(ranked) != 2 || ranked[0] != tc.wantHead {
				t.Fatalf("ranked %v (choices %+v), want %s first", ranked, choices, tc.wantHead)
			}
			if r.Snapshot().Depth() != 0 {
				t.Fatalf("snapshot left at depth %d", r.Snapshot().Depth())
			}
		})
	}
}

func TestFirstAlternativeOnly(t *testing.T) {
	r, _ := newRunner(t)
	load(t, r)
	tmpl, _ := r.Snapshot().ResourceClaimTemplate(ns, "whole-or-2")
	got, changed := FirstAlternativeOnly(tmpl.Spec.Spec)
	if !changed || len(got.Devices.Requests) != 1 || got.Devices.Requests[0].Exactly == nil ||
		got.Devices.Requests[0].Name != "gpu" || len(got.Devices.Requests[0].Exactly.Selectors) != 1 {
		t.Fatalf("FirstAlternativeOnly = %+v, %v", got.Devices.Requests, changed)
	}
	if !HasPrioritizedList(&tmpl.Spec.Spec) || HasPrioritizedList(&got) {
		t.Error("HasPrioritizedList wrong")
	}
	plain, _ := r.Snapshot().ResourceClaimTemplate(ns, "s2")
	if _, changed := FirstAlternativeOnly(plain.Spec.Spec); changed {
		t.Error("a spec without alternatives changed")
	}
}

// A node's state key is its content up to node and pool names: twins of
// one layout share it, whatever their pools are called, and a device,
// a generation or an allocation that differs keeps them apart.
func TestStateKeys(t *testing.T) {
	renamedPools := func(name string) []any {
		objs := migNode(name)
		for _, o := range objs[1:] {
			s := o.(*resourceapi.ResourceSlice)
			s.Spec.Pool.Name = name + "/gpus"
		}
		return objs
	}
	generation := func(name string) []any {
		objs := migNode(name)
		for _, o := range objs[1:] {
			o.(*resourceapi.ResourceSlice).Spec.Pool.Generation = 2
		}
		return objs
	}
	for _, tc := range []struct {
		name   string
		a, b   []any
		placed string // a pod of this template on a only
		same   bool
	}{
		{"twins", migNode("a"), migNode("b"), "", true},
		{"twins with pools named after them", renamedPools("a"), renamedPools("b"), "", true},
		{"twins sharing devices", sharedNode("a"), sharedNode("b"), "", true},
		{"an allocation", migNode("a"), migNode("b"), "s2", false},
		{"a shared device's consumed capacity", sharedNode("a"), sharedNode("b"), "mem20", false},
		{"other devices", plainNode("a", 2), plainNode("b", 3), "", false},
		{"another pool generation", migNode("a"), generation("b"), "", false},
		{"another pool name", migNode("a"), renamedPools("b"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			load(t, r, tc.a, tc.b)
			if tc.placed != "" {
				place(t, ctx, r, "p", tc.placed, "a")
			}
			an := NewAnalyzer(r)
			a, err := an.measure("a")
			if err != nil {
				t.Fatal(err)
			}
			b, err := an.measure("b")
			if err != nil {
				t.Fatal(err)
			}
			if same := a.key == b.key; same != tc.same {
				t.Errorf("same key %v, want %v", same, tc.same)
			}
		})
	}
}

// The analyzer outlives passes and memoises a node's state by its
// snapshot.Gen: a pass that rebuilds the snapshot (Reset) with the node
// in another state, by the same sequence of changes, must not read the
// earlier pass's measurement back.
func TestMeasureAcrossResets(t *testing.T) {
	for _, tc := range []struct {
		name               string
		before, after      string // the template of the pod placed on n1 in each pass
		wantFree, wantLeft float64
	}{
		{"more slices used", "s2", "s5", 2, 2},
		{"fewer slices used", "s5", "s2", 5, 2},
		{"the whole GPU, then one slice", "whole", "s1", 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			a := NewAnalyzer(r)
			for pass, tmpl := range []string{tc.before, tc.after} {
				if err := r.Snapshot().Reset(); err != nil {
					t.Fatal(err)
				}
				load(t, r, migNode("n1"))
				place(t, ctx, r, "used", tmpl, "n1")
				rep, err := a.Node(ctx, "n1", shapes(t, r, "s3"))
				if err != nil {
					t.Fatal(err)
				}
				if pass == 1 && (rep.Free[slicesRes] != tc.wantFree || rep.Stranded[slicesRes] != tc.wantLeft) {
					t.Errorf("after a Reset: free %v stranded %v slices, want %v and %v (the earlier pass's state read back?)",
						rep.Free[slicesRes], rep.Stranded[slicesRes], tc.wantFree, tc.wantLeft)
				}
			}
		})
	}
}

// What the analyzer keeps by node generation or slice object is of one
// pass: many passes over nodes that are made anew each time (as
// hypothetical nodes are) keep it at one pass's size.
func TestPerPassMemosStayBounded(t *testing.T) {
	r, ctx := newRunner(t)
	a := NewAnalyzer(r)
	var states, sliceKeys int
	for pass := range 50 {
		if err := r.Snapshot().Reset(); err != nil {
			t.Fatal(err)
		}
		// Pools named "<node>/<pool>", as a template's second pool is,
		// are keyed by slice object.
		n1 := migNode("n1")
		for _, o := range n1[1:] {
			o.(*resourceapi.ResourceSlice).Spec.Pool.Name = "n1/gpus"
		}
		load(t, r, n1)
		place(t, ctx, r, "used", "s2", "n1")
		if _, err := a.Node(ctx, "n1", shapes(t, r, "s3")); err != nil {
			t.Fatal(err)
		}
		if pass == 0 {
			states, sliceKeys = len(a.states), len(a.sliceKeys)
			if states == 0 || sliceKeys == 0 {
				t.Fatalf("one pass memoised %d states and %d slice keys, want some of each", states, sliceKeys)
			}
			continue
		}
		if len(a.states) > states || len(a.sliceKeys) > sliceKeys {
			t.Fatalf("pass %d: %d states and %d slice keys memoised, want at most %d and %d as after the first pass",
				pass, len(a.states), len(a.sliceKeys), states, sliceKeys)
		}
	}
}

// The analyzer keeps a node's measurement across passes (the snapshot's
// Reset) while the build adds the same slice and node objects with the
// same allocations, and measures again when any of them changed.
func TestMeasureKeptAcrossPasses(t *testing.T) {
	r, _ := newRunner(t)
	a := NewAnalyzer(r)
	claim := func(name string, devices ...string) *resourceapi.ResourceClaim {
		var results []resourceapi.DeviceRequestAllocationResult
		for _, d := range devices {
			results = append(results, builder.AllocatedDevice("gpu", gpuDriver, "n1", d))
		}
		return builder.Claim(ns, name).Request(builder.Request("gpu", "gpu")).Allocated("n1", results...).Obj()
	}
	one, two := claim("c", "gpu-0-slice-0"), claim("c", "gpu-0-slice-0", "gpu-0-slice-1")
	node, fresh := migNode("n1"), migNode("n1")
	steps := []struct {
		name     string
		objs     []any
		wantFree float64
		reused   bool
	}{
		{"first pass", slices.Concat(node, []any{one}), 6, false},
		{"the same objects", slices.Concat(node, []any{one}), 6, true},
		{"another claim, the same devices", slices.Concat(node, []any{claim("d", "gpu-0-slice-0")}), 6, true},
		{"one more device allocated", slices.Concat(node, []any{two}), 5, false},
		{"the same again", slices.Concat(node, []any{two}), 5, true},
		{"slices replaced by equal ones", slices.Concat(node[:1], fresh[1:], []any{two}), 5, false},
		{"the node replaced by an equal one", slices.Concat(fresh, []any{two}), 5, false},
		{"nothing allocated", fresh, 7, false},
	}
	var last map[Resource]float64
	for _, s := range steps {
		if err := r.Snapshot().Reset(); err != nil {
			t.Fatal(err)
		}
		load(t, r, s.objs)
		st, err := a.measure("n1")
		if err != nil {
			t.Fatal(err)
		}
		if st.free[slicesRes] != s.wantFree {
			t.Errorf("%s: free %v slices, want %v", s.name, st.free[slicesRes], s.wantFree)
		}
		if reused := last != nil && reflect.ValueOf(st.free).UnsafePointer() == reflect.ValueOf(last).UnsafePointer(); reused != s.reused {
			t.Errorf("%s: last pass's measurement reused %v, want %v", s.name, reused, s.reused)
		}
		last = st.free
	}
}

// MeasureAhead reads nodes side by side (the race detector, which make
// test runs this package with, sees it: shared devices' consumed capacity
// included, whose quantities the snapshot holds) and the reports are
// those an analyzer measuring one node at a time gives; a node changed
// since is measured again.
func TestMeasureAhead(t *testing.T) {
	r, ctx := newRunner(t)
	var objs [][]any
	var names []string
	for i := range 3 * minParallelNodes {
		name := fmt.Sprintf("n%d", i)
		switch i % 3 {
		case 0:
			objs = append(objs, migNode(name))
		case 1:
			objs = append(objs, plainNode(name, 1+i%4))
		default:
			objs = append(objs, sharedNode(name))
		}
		names = append(names, name)
	}
	load(t, r, objs...)
	for i, tmpl := range []string{"s2", "s3", "s4"} {
		place(t, ctx, r, fmt.Sprintf("p%d", i), tmpl, names[3*i])
	}
	for i := range 2 * minParallelNodes {
		place(t, ctx, r, fmt.Sprintf("m%d", i), "mem20", names[3*(i%minParallelNodes)+2])
	}
	sh := shapes(t, r, "s2", "s3")
	ahead, one := NewAnalyzer(r), NewAnalyzer(r)
	ahead.MeasureAhead(names)
	if len(ahead.byGen) != len(names) {
		t.Fatalf("%d nodes measured ahead, want %d", len(ahead.byGen), len(names))
	}
	place(t, ctx, r, "late", "s2", names[6]) // changed after: measured again
	for _, n := range names {
		got, err := ahead.Node(ctx, n, sh)
		if err != nil {
			t.Fatal(err)
		}
		want, err := one.Node(ctx, n, sh)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: measured ahead %+v, one by one %+v", n, got, want)
		}
	}
}
