package clusterapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const gpuGroup = "MachineDeployment/team/gpu"

func TestIncreaseSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		atomic  bool
		from    int64
		delta   int
		want    int64
		err     string
		failing bool
		unit    string // the unit-size annotation, if any
	}{
		{name: "grows through the scale subresource", from: 1, delta: 2, want: 3},
		{name: "units: whole units", unit: "2", atomic: true, from: 0, delta: 4, want: 4},
		{name: "units: part of a unit refused, nothing written", unit: "2", atomic: true, from: 0, delta: 3, want: 0, err: "whole units of 2"},
		{name: "from zero", from: 0, delta: 1, want: 1},
		{name: "atomic: the whole delta in one write", atomic: true, from: 1, delta: 4, want: 5},
		{name: "above max refused, nothing written", from: 4, delta: 2, want: 4, err: "size increase too large - desired:6 max:5"},
		{name: "atomic above max refused", atomic: true, from: 4, delta: 2, want: 4, err: "desired:6 max:5"},
		{name: "non-positive", from: 1, delta: 0, want: 1, err: "must be positive"},
		{name: "write fails", from: 1, delta: 1, want: 1, err: "setting replicas", failing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := md("gpu").size(0, 5).replicas(tc.from)
			if tc.unit != "" {
				group = group.ann(cloudprovider.AnnotationUnitSize, tc.unit)
			}
			e := newEnv(t, nil, group)
			if tc.failing {
				e.failPatch["machinedeployments/scale"] = errors.New("boom")
			}
			g := e.group(gpuGroup)
			inc := g.IncreaseSize
			if tc.atomic {
				inc = g.AtomicIncreaseSize
			}
			created, err := inc(t.Context(), tc.delta)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if created != nil {
				t.Fatalf("created %v: Cluster API cannot name Machines at request time", created)
			}
			if got := e.replicas(kindMachineDeployment, "gpu"); got != tc.want {
				t.Fatalf("replicas %d, want %d", got, tc.want)
			}
			// The target shows the write at once, before the informer.
			if target, _ := g.TargetSize(); int64(target) != tc.want {
				t.Fatalf("target %d, want %d", target, tc.want)
			}
		})
	}
}

// Standalone MachineSets and MachinePools scale through their own scale
// subresources.
func TestIncreaseSizeOtherKinds(t *testing.T) {
	e := newEnv(t, nil, ms("solo").size(0, 3), mp("pool").size(0, 3).replicas(1))
	for id, kind := range map[string]string{"MachineSet/team/solo": kindMachineSet, "MachinePool/team/pool": kindMachinePool} {
		g := e.group(id)
		before := e.replicas(kind, g.name)
		if _, err := g.IncreaseSize(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		if got := e.replicas(kind, g.name); got != before+2 {
			t.Fatalf("%s: replicas %d, want %d", id, got, before+2)
		}
	}
}

func TestTargetSizeFollowsTheInformer(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 5).replicas(1))
	g := e.group(gpuGroup)
	if _, err := g.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	// Someone else scales: once the informer has it, the target is theirs.
	e.write(e.gvr(kindMachineDeployment), md("gpu").size(0, 5).replicas(4))
	e.refresh()
	if target, _ := g.TargetSize(); target != 4 {
		t.Fatalf("target %d, want 4", target)
	}
}

// nodeOf is the Node of a Machine with providerID pid.
func nodeOf(name, pid string) *corev1.Node {
	n := builder.Node(name).Obj()
	n.Spec.ProviderID = pid
	return n
}

func isMarked(e *env, name string) bool {
	_, ok := e.get(kindMachine, name).GetAnnotations()["cluster.x-k8s.io/delete-machine"]
	return ok
}

func TestDeleteNodes(t *testing.T) {
	base := func() []*obj {
		return []*obj{
			md("gpu").size(1, 5).replicas(3), md("cpu").size(0, 5).replicas(1),
			machine("m1").of("gpu").providerID("test:///m1").node("n1"),
			machine("m2").of("gpu").providerID("test:///m2").node("n2"),
			machine("m3").of("gpu").providerID("test:///m3").node("n3"),
			machine("c1").of("cpu").providerID("test:///c1").node("c1"),
		}
	}
	for _, tc := range []struct {
		name     string
		objs     func() []*obj
		nodes    []*corev1.Node
		force    bool
		fail     string // resource whose patches fail
		replicas int64
		marked   []string
		err      string
	}{
		{name: "marks exactly the chosen Machine, then lowers replicas", nodes: []*corev1.Node{nodeOf("n2", "test:///m2")}, replicas: 2, marked: []string{"m2"}},
		{name: "two at once", nodes: []*corev1.Node{nodeOf("n2", "test:///m2"), nodeOf("n3", "test:///m3")}, replicas: 1, marked: []string{"m2", "m3"}},
		{name: "below min refused, nothing marked", nodes: []*corev1.Node{nodeOf("n1", "test:///m1"), nodeOf("n2", "test:///m2"), nodeOf("n3", "test:///m3")},
			replicas: 3, err: "below the min size 1"},
		{name: "force goes below min", force: true, nodes: []*corev1.Node{nodeOf("n1", "test:///m1"), nodeOf("n2", "test:///m2"), nodeOf("n3", "test:///m3")},
			replicas: 0, marked: []string{"m1", "m2", "m3"}},
		{name: "a node of another group", nodes: []*corev1.Node{nodeOf("c1", "test:///c1")}, replicas: 3, err: "does not belong to it"},
		{name: "an unknown node", nodes: []*corev1.Node{nodeOf("x", "test:///x")}, replicas: 3, err: "does not belong to it"},
		{name: "the decrement fails: the mark is taken off again", fail: "machinedeployments/scale", nodes: []*corev1.Node{nodeOf("n2", "test:///m2")}, replicas: 3, err: "setting replicas"},
		{name: "the mark fails: replicas untouched", fail: "machines", nodes: []*corev1.Node{nodeOf("n2", "test:///m2")}, replicas: 3, err: "annotating Machine team/m2"},
		{name: "a Machine already deleting is not counted again", objs: func() []*obj {
			o := base()
			o[4] = machine("m3").of("gpu").providerID("test:///m3").node("n3").deleting()
			return o
		}, nodes: []*corev1.Node{nodeOf("n3", "test:///m3")}, replicas: 3},
		{name: "a pending Machine named by the tracker", objs: func() []*obj {
			return append(base(), machine("m4").of("gpu"))
		}, force: true, nodes: []*corev1.Node{nodeOf(pendingPrefix+"team/m4", pendingPrefix+"team/m4")}, replicas: 2, marked: []string{"m4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := base()
			if tc.objs != nil {
				objs = tc.objs()
			}
			e := newEnv(t, nil, objs...)
			if tc.fail != "" {
				e.failPatch[tc.fail] = errors.New("boom")
			}
			g := e.group(gpuGroup)
			del := g.DeleteNodes
			if tc.force {
				del = g.ForceDeleteNodes
			}
			err := del(t.Context(), tc.nodes)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			delete(e.failPatch, tc.fail)
			if got := e.replicas(kindMachineDeployment, "gpu"); got != tc.replicas {
				t.Fatalf("replicas %d, want %d", got, tc.replicas)
			}
			for _, m := range []string{"m1", "m2", "m3", "c1"} {
				want := false
				for _, x := range tc.marked {
					want = want || x == m
				}
				if isMarked(e, m) != want {
					t.Errorf("Machine %s marked: %v, want %v", m, !want, want)
				}
			}
		})
	}
}

// A retried DeleteNodes never lowers replicas twice for one Machine: in
// the same process, and in a new one that finds the mark.
func TestDeleteNodesRetry(t *testing.T) {
	objs := []*obj{md("gpu").size(0, 5).replicas(3),
		machine("m1").of("gpu").providerID("test:///m1").node("n1"),
		machine("m2").of("gpu").providerID("test:///m2").node("n2"),
		machine("m3").of("gpu").providerID("test:///m3").node("n3")}
	e := newEnv(t, nil, objs...)
	g := e.group(gpuGroup)
	n2 := nodeOf("n2", "test:///m2")
	for i := range 2 {
		if err := g.DeleteNodes(t.Context(), []*corev1.Node{n2}); err != nil {
			t.Fatal(err)
		}
		if got := e.replicas(kindMachineDeployment, "gpu"); got != 2 {
			t.Fatalf("call %d: replicas %d, want 2", i, got)
		}
	}
	e.refresh()
	if err := g.DeleteNodes(t.Context(), []*corev1.Node{n2}); err != nil {
		t.Fatal(err)
	}
	// A restarted autoscaler: it only has the mark and the surplus.
	e2 := &env{t: t, dyn: e.dyn, disc: e.disc, failPatch: map[string]error{}}
	p2, err := New(t.Context(), Options{Dynamic: e.dyn, Discovery: e.disc, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p2.Cleanup() }()
	e2.p = p2
	e2.refresh()
	g2 := e2.group(gpuGroup)
	if err := g2.DeleteNodes(t.Context(), []*corev1.Node{n2}); err != nil {
		t.Fatal(err)
	}
	if got := e.replicas(kindMachineDeployment, "gpu"); got != 2 {
		t.Fatalf("after a restart: replicas %d, want 2", got)
	}
	// A second node in the restarted process is lowered once more.
	if err := g2.DeleteNodes(t.Context(), []*corev1.Node{n2, nodeOf("n3", "test:///m3")}); err != nil {
		t.Fatal(err)
	}
	if got := e.replicas(kindMachineDeployment, "gpu"); got != 1 || !isMarked(e, "m3") || isMarked(e, "m1") {
		t.Fatalf("replicas %d, m3 marked %v, m1 marked %v", got, isMarked(e, "m3"), isMarked(e, "m1"))
	}
}

// A MachinePool node without a Machine cannot be chosen: lowering the
// pool's replicas would let the pool pick any instance.
func TestDeleteNodesMachinePoolWithoutMachines(t *testing.T) {
	e := newEnv(t, nil, mp("pool").size(0, 4).replicas(2).set([]any{"test:///p1", "test:///p2"}, "spec", "providerIDList"))
	g := e.group("MachinePool/team/pool")
	err := g.DeleteNodes(t.Context(), []*corev1.Node{nodeOf("p1", "test:///p1")})
	if err == nil || !strings.Contains(err.Error(), "has no Machine") {
		t.Fatalf("err = %v", err)
	}
	if got := e.replicas(kindMachinePool, "pool"); got != 2 {
		t.Fatalf("replicas %d", got)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	objs := func(replicas int64) []*obj {
		return []*obj{md("gpu").size(0, 9).replicas(replicas),
			machine("run").of("gpu").providerID("test:///run").node("run").created(t0),
			machine("old").of("gpu").created(t0.Add(time.Minute)),
			machine("new").of("gpu").providerID("test:///new").created(t0.Add(2 * time.Minute))}
	}
	for _, tc := range []struct {
		name     string
		replicas int64
		delta    int
		want     int64
		marked   []string
		err      string
	}{
		{name: "replicas no Machine stands for go first", replicas: 5, delta: -2, want: 3},
		{name: "then the newest Machine without a Node", replicas: 3, delta: -1, want: 2, marked: []string{"new"}},
		{name: "both pending Machines", replicas: 4, delta: -3, want: 1, marked: []string{"new", "old"}},
		{name: "never a Machine with a Node", replicas: 3, delta: -3, want: 3, err: "only 2 requested node(s) have not registered"},
		{name: "positive delta", replicas: 3, delta: 1, want: 3, err: "must be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, objs(tc.replicas)...)
			err := e.group(gpuGroup).DecreaseTargetSize(t.Context(), tc.delta)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := e.replicas(kindMachineDeployment, "gpu"); got != tc.want {
				t.Fatalf("replicas %d, want %d", got, tc.want)
			}
			for _, m := range []string{"run", "old", "new"} {
				want := false
				for _, x := range tc.marked {
					want = want || x == m
				}
				if isMarked(e, m) != want {
					t.Errorf("Machine %s marked %v, want %v", m, !want, want)
				}
			}
		})
	}
}

// Replicas are written on the condition that nobody changed them since
// they were read: a change made meanwhile (a person, GitOps) makes the
// write conflict, and the scale is decided again on what is there now,
// never overwriting it.
func TestReplicaWritesNeverOverwrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(g *nodeGroup) error
		// someone sets replicas to this between the read and the write.
		someone int64
		want    int64
		err     string
	}{
		{name: "increase builds on the change", op: func(g *nodeGroup) error { _, err := g.IncreaseSize(t.Context(), 2); return err },
			someone: 3, want: 5},
		{name: "increase decided again: now above max", op: func(g *nodeGroup) error { _, err := g.IncreaseSize(t.Context(), 2); return err },
			someone: 4, want: 4, err: "desired:6 max:5"},
		{name: "decrease of unbacked replicas builds on the change", op: func(g *nodeGroup) error { return g.DecreaseTargetSize(t.Context(), -1) },
			someone: 3, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, md("gpu").size(0, 5).replicas(1))
			e.meanwhile = func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, tc.someone, "spec", "replicas")
			}
			err := tc.op(e.group(gpuGroup))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := e.replicas(kindMachineDeployment, "gpu"); got != tc.want {
				t.Fatalf("replicas %d, want %d (someone set %d meanwhile)", got, tc.want, tc.someone)
			}
		})
	}
}
