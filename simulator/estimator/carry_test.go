package estimator

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// carried is an estimate in comparable form, unplaced verdicts in full.
func carriedOutcome(r *Estimate) (outcome, []string) {
	var verdicts []string
	for u := range r.Unplaced.All() {
		verdicts = append(verdicts, fmt.Sprintf("%s %s %s %s", u.Pod.Name, u.Result.Plugin, u.Result.Message, u.Limit))
	}
	return outcomeOf(r), verdicts
}

// Whenever Carry accepts an earlier estimate for fewer pods and another
// cap, it is what estimating those pods with that cap gives. The memo
// scenarios, plus a class that fits no node, under caps that bind or not;
// pods dropped: every unplaced one, every other, the first, one placed
// pod of several (which Carry must refuse), every placed pod (with or
// without an unplaced one).
func TestCarryMatchesEstimatingAgain(t *testing.T) {
	emptiedAll := 0
	for _, sc := range memoScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			objs, pods, tmpl := sc.cluster(t)
			snapshottest.Load(t, r.Snapshot(), objs...)
			for i := range 3 {
				pods = append(pods, builder.Pod(ns, fmt.Sprintf("huge-%d", i)).CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj())
			}
			e := New(r, Options{})
			accepted, emptied := 0, 0
			for _, cap := range []int{0, 2, 3} {
				prev, err := e.EstimateGroups(ctx, pods, []TemplateGroup{{Name: "g", Template: tmpl, MaxNodes: cap}})
				if err != nil {
					t.Fatal(err)
				}
				var unplaced []*v1.Pod
				for u := range prev[0].Unplaced.All() {
					unplaced = append(unplaced, u.Pod)
				}
				var everyOther []*v1.Pod
				for i := 0; i < len(unplaced); i += 2 {
					everyOther = append(everyOther, unplaced[i])
				}
				drops := map[string][]*v1.Pod{"none": nil, "all unplaced": unplaced, "every other unplaced": everyOther}
				if len(unplaced) > 0 {
					drops["first unplaced"] = unplaced[:1]
				}
				if len(prev[0].Placements) > 1 {
					drops["a placed pod"] = []*v1.Pod{prev[0].Placements[len(prev[0].Placements)-1].Pod}
				}
				var placed []*v1.Pod
				for _, pl := range prev[0].Placements {
					placed = append(placed, pl.Pod)
				}
				if len(placed) > 0 {
					drops["every placed pod"] = placed
					drops["every placed and the first unplaced"] = append(placed[:len(placed):len(placed)], unplaced[:min(1, len(unplaced))]...)
				}
				for what, dropped := range drops {
					left := without(pods, dropped)
					for _, now := range []int{cap, cap + 1, 0, prev[0].NodeCount, prev[0].NodeCount + 1} {
						g := TemplateGroup{Name: "g", Template: tmpl, MaxNodes: now}
						got, ok := e.Carry(prev[0], g, DroppedOf(dropped))
						if what == "a placed pod" && ok {
							t.Fatalf("cap %d→%d: carried with a placed pod dropped", cap, now)
						}
						if !ok {
							continue
						}
						accepted++
						if len(got.Placements) < len(prev[0].Placements) {
							emptied++
						}
						fresh, err := e.EstimateGroups(ctx, left, []TemplateGroup{g})
						if err != nil {
							t.Fatal(err)
						}
						wantO, wantV := carriedOutcome(fresh[0])
						gotO, gotV := carriedOutcome(got)
						if !reflect.DeepEqual(wantO, gotO) || !reflect.DeepEqual(wantV, gotV) {
							t.Fatalf("cap %d→%d, dropped %s: carried\n%+v\n%q\nestimated again\n%+v\n%q", cap, now, what, gotO, gotV, wantO, wantV)
						}
					}
				}
			}
			if accepted == 0 {
				t.Fatal("Carry accepted nothing: the test checks nothing")
			}
			emptiedAll += emptied
			t.Logf("%d carried estimates checked, %d of them emptied", accepted, emptied)
		})
	}
	if emptiedAll == 0 {
		t.Fatal("no carried estimate had its placements dropped: the test checks too little")
	}
}

// A round's Dropped filters each run of unplaced pods once: the groups
// estimated over one order have the same runs (with verdicts of their
// own), and their carried estimates share the pods left. A run of other
// storage is filtered on its own, a run without dropped pods is kept as
// it is, and a list left takes no append into another's runs.
func TestDroppedFiltersEachRunOnce(t *testing.T) {
	var order []*v1.Pod
	for i := range 6 {
		order = append(order, builder.Pod(ns, fmt.Sprintf("p-%d", i)).Obj())
	}
	fit, other := &framework.NodeResult{Plugin: "NodeResourcesFit"}, &framework.NodeResult{Plugin: "DynamicResources"}
	list := func(pods []*v1.Pod, result *framework.NodeResult, idx ...int) UnplacedPods {
		var u UnplacedPods
		for _, i := range idx {
			u.add(pods, i, result, "")
		}
		return u
	}
	a := list(order, fit, 0, 1, 2, 3)
	b := list(order, other, 0, 1, 2, 3) // another group's verdicts on the same pods
	copied := slices.Clone(order)
	c := list(copied, fit, 0, 1, 2, 3)
	clean := list(order, fit, 4, 5)
	// Dropped besides p-1: a pod of none of the lists.
	d := DroppedOf([]*v1.Pod{order[1], builder.Pod(ns, "elsewhere").Obj()})
	fa, fb, fc, fclean := d.without(a), d.without(b), d.without(c), d.without(clean)
	names := func(u UnplacedPods) (out []string) {
		for x := range u.All() {
			out = append(out, x.Pod.Name+" "+x.Result.Plugin)
		}
		return out
	}
	if got, want := names(fa.left), []string{"p-0 NodeResourcesFit", "p-2 NodeResourcesFit", "p-3 NodeResourcesFit"}; !slices.Equal(got, want) || fa.found != 1 {
		t.Fatalf("filtered %q (found %d), want %q (found 1)", got, fa.found, want)
	}
	if got := names(fb.left); len(got) != 3 || got[0] != "p-0 DynamicResources" || fb.found != 1 {
		t.Errorf("the other group's list left %q (found %d), want its own verdicts on p-0, p-2, p-3", got, fb.found)
	}
	if &fa.left.runs[0].pods[0] != &fb.left.runs[0].pods[0] {
		t.Error("the same run filtered twice")
	}
	if !slices.Equal(names(fc.left), names(fa.left)) || &fc.left.runs[0].pods[0] == &fa.left.runs[0].pods[0] {
		t.Error("a run of other storage took the first one's result")
	}
	if &fclean.left.runs[0].pods[0] != &order[4] || fclean.found != 0 {
		t.Error("a run without dropped pods was copied")
	}
	for _, f := range []filtered{fa, fb, fc, fclean} {
		if cap(f.left.runs) != len(f.left.runs) {
			t.Errorf("the list left has room for %d appends into shared storage", cap(f.left.runs)-len(f.left.runs))
		}
	}

	// Two alike groups: one estimate, renamed; both carried past a round.
	r, ctx := newRunner(t)
	objs, ps, tmpl := memoScenarios()[0].cluster(t)
	snapshottest.Load(t, r.Snapshot(), objs...)
	huge := builder.Pod(ns, "huge").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj()
	ps = append(ps, huge, builder.Pod(ns, "huge-too").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj())
	e := New(r, Options{})
	groups := []TemplateGroup{{Name: "g", Template: tmpl}, {Name: "h", Template: tmpl}}
	prev, err := e.EstimateGroups(ctx, ps, groups)
	if err != nil {
		t.Fatal(err)
	}
	if prev[0].Unplaced.Len() == 0 || &prev[0].Unplaced.runs[0] != &prev[1].Unplaced.runs[0] {
		t.Fatal("the alike groups' estimates do not share their unplaced pods: the case shows nothing")
	}
	drop := DroppedOf([]*v1.Pod{huge})
	var got []*Estimate
	for i, g := range groups {
		res, ok := e.Carry(prev[i], g, drop)
		if !ok {
			t.Fatalf("group %s not carried", g.Name)
		}
		got = append(got, res)
		fresh, err := e.EstimateGroups(ctx, without(ps, []*v1.Pod{huge}), []TemplateGroup{g})
		if err != nil {
			t.Fatal(err)
		}
		wantO, wantV := carriedOutcome(fresh[0])
		gotO, gotV := carriedOutcome(res)
		if !reflect.DeepEqual(wantO, gotO) || !reflect.DeepEqual(wantV, gotV) {
			t.Fatalf("group %s carried\n%+v\n%q\nestimated again\n%+v\n%q", g.Name, gotO, gotV, wantO, wantV)
		}
	}
	if got[0].Unplaced.Len() == 0 {
		t.Fatal("nothing left unplaced: the case shows nothing")
	}
	if &got[0].Unplaced.runs[0] != &got[1].Unplaced.runs[0] {
		t.Error("the alike groups' carried estimates filtered their shared list apart")
	}
}

// The unplaced pods' verdicts were given on a node the estimate dropped:
// once a node of that name exists, the estimate is not carried.
func TestCarryNeedsTheDroppedNodesFree(t *testing.T) {
	r, ctx := newRunner(t)
	pods := []*v1.Pod{builder.Pod(ns, "huge").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj()}
	e := New(r, Options{})
	g := TemplateGroup{Name: "g", Template: gpuTemplate(8, nil)}
	prev, err := e.EstimateGroups(ctx, pods, []TemplateGroup{g})
	if err != nil {
		t.Fatal(err)
	}
	if u := slices.Collect(prev[0].Unplaced.All()); len(u) != 1 || len(prev[0].droppedNodes) != 1 || u[0].Result.Node != "" {
		t.Fatalf("unplaced %+v, dropped nodes %q: want one verdict naming no node, one dropped node", prev[0].Unplaced, prev[0].droppedNodes)
	}
	if _, ok := e.Carry(prev[0], g, nil); !ok {
		t.Fatal("not carried with the dropped node's name free")
	}
	snapshottest.Load(t, r.Snapshot(), builder.Node(prev[0].droppedNodes[0]).Obj())
	if _, ok := e.Carry(prev[0], g, nil); ok {
		t.Fatalf("carried with node %s in the snapshot", prev[0].droppedNodes[0])
	}
}

// An estimate whose every placed pod is dropped is carried as its
// unplaced pods only when the dropped placements and the names of the
// nodes then open decided none of their verdicts. The pods dropped are
// always the "first" ones; "later" pods were left unplaced.
func TestCarryEmptied(t *testing.T) {
	hostname := func(p *v1.Pod) *v1.Pod {
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: "g-template-0"}
		return p
	}
	for _, tc := range []struct {
		name         string
		first, later []*v1.Pod
		// shared: the only GPU is on a slice bound to no node.
		shared bool
		want   bool
	}{{
		name:  "node-local devices, a later class too big for a node",
		first: templatePods("first", "one-gpu", "2", 3),
		later: []*v1.Pod{builder.Pod(ns, "huge").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj()},
		want:  true,
	}, {
		// The first pod took the fabric's one GPU: the later one found none.
		name:   "network-attached devices",
		first:  templatePods("first", "one-gpu", "2", 1),
		later:  templatePods("later", "one-gpu", "1", 1),
		shared: true,
	}, {
		// The later pod wants node g-template-0, which the first filled;
		// it was refused on g-template-1, and a fresh estimate asks
		// g-template-0 again.
		name:  "a class selecting a node by name",
		first: templatePods("first", "one-gpu", "64", 1),
		later: []*v1.Pod{hostname(builder.Pod(ns, "named").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "named").Obj())},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx, tmpl := oneGPUCluster(t, 8, tc.shared, 1)
			e := New(r, Options{})
			g := TemplateGroup{Name: "g", Template: tmpl}
			prev, err := e.EstimateGroups(ctx, append(tc.first, tc.later...), []TemplateGroup{g})
			if err != nil {
				t.Fatal(err)
			}
			if len(prev[0].Placements) != len(tc.first) || prev[0].Unplaced.Len() != len(tc.later) {
				t.Fatalf("placed %d, unplaced %d: want the first %d placed and the later %d not", len(prev[0].Placements), prev[0].Unplaced.Len(), len(tc.first), len(tc.later))
			}
			fresh, err := e.EstimateGroups(ctx, tc.later, []TemplateGroup{g})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := e.Carry(prev[0], g, DroppedOf(tc.first))
			if ok != tc.want {
				t.Fatalf("carried: %v, want %v (estimated again, %d of %d later pods placed)", ok, tc.want, len(fresh[0].Placements), len(tc.later))
			}
			if !ok {
				if len(fresh[0].Placements) == 0 {
					t.Fatal("estimated again, the later pods still fit nowhere: the case shows nothing")
				}
				return
			}
			wantO, wantV := carriedOutcome(fresh[0])
			gotO, gotV := carriedOutcome(got)
			if !reflect.DeepEqual(wantO, gotO) || !reflect.DeepEqual(wantV, gotV) {
				t.Fatalf("carried\n%+v\n%q\nestimated again\n%+v\n%q", gotO, gotV, wantO, wantV)
			}
		})
	}
}

// A keep that takes devices of a slice bound to no node changes what
// every node's verdict reads: KeptLocal says so. One that takes only its
// own node's devices does not.
func TestKeptLocal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		want   bool
	}{{"node-local devices", false, true}, {"network-attached devices", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx, tmpl := oneGPUCluster(t, 2, tc.shared, 4)
			e := New(r, Options{})
			m := e.Mark()
			res, err := e.EstimateAndKeep(ctx, templatePods("job", "one-gpu", "1", 2), tmpl, "g")
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Placements) != 2 {
				t.Fatalf("placed %d of 2 pods: %+v", len(res.Placements), res.Unplaced)
			}
			if got := e.KeptLocal(m, res, tmpl); got != tc.want {
				t.Errorf("KeptLocal = %v, want %v", got, tc.want)
			}
		})
	}
}

// oneGPUCluster is a runner whose cluster has the GPU classes and the
// "one-gpu" claim template, and a template of gpus GPUs; with fabric, the
// template has no slice and the cluster a slice of fabricGPUs bound to no
// node instead.
func oneGPUCluster(t *testing.T, gpus int, fabric bool, fabricGPUs int) (*framework.Runner, context.Context, *cloudprovider.NodeTemplate) {
	r, ctx := newRunner(t)
	objs := append(classes(), builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
	tmpl := gpuTemplate(gpus, nil)
	if fabric {
		objs = append(objs, gpuSlice("fabric", "", "fabric", fabricGPUs))
		tmpl.ResourceSlices = nil
	}
	snapshottest.Load(t, r.Snapshot(), objs...)
	return r, ctx, tmpl
}

func without(pods, drop []*v1.Pod) []*v1.Pod {
	gone := map[types.UID]bool{}
	for _, p := range drop {
		gone[p.UID] = true
	}
	var out []*v1.Pod
	for _, p := range pods {
		if !gone[p.UID] {
			out = append(out, p)
		}
	}
	return out
}
