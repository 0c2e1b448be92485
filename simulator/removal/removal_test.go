package removal

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns  = "default"
	gpu = "gpu.example.com"
)

func newRunner(t *testing.T, objs ...any) (*framework.Runner, context.Context) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, r.Snapshot(), objs...)
	return r, ctx
}

func cpuPod(name, node, cpu string) *corev1.Pod {
	return builder.Pod(ns, name).CPU(cpu).OwnedBy("apps/v1", "ReplicaSet", "rs").Node(node).Obj()
}

func TestTry(t *testing.T) {
	n := func(name, cpu string) *corev1.Node { return builder.Node(name).CPU(cpu).Obj() }
	type try struct {
		node      string
		pods      []*corev1.Pod
		removable bool
		reason    string
		moves     map[string]string
	}
	tests := []struct {
		name  string
		objs  []any
		dests []string
		tries []try
	}{
		{
			name:  "a pod that fits elsewhere moves",
			objs:  []any{n("n1", "4"), n("n2", "4"), cpuPod("p", "n1", "2")},
			dests: []string{"n1", "n2"},
			tries: []try{{node: "n1", pods: []*corev1.Pod{cpuPod("p", "n1", "2")}, removable: true, moves: map[string]string{ns + "/p": "n2"}}},
		},
		{
			name:  "two nodes cannot count on the same free room",
			objs:  []any{n("n1", "4"), n("n2", "4"), n("n3", "4"), cpuPod("a", "n1", "3"), cpuPod("b", "n2", "3")},
			dests: []string{"n3", "n1", "n2"},
			tries: []try{
				{node: "n1", pods: []*corev1.Pod{cpuPod("a", "n1", "3")}, removable: true, moves: map[string]string{ns + "/a": "n3"}},
				{node: "n2", pods: []*corev1.Pod{cpuPod("b", "n2", "3")}, reason: "fits no other node"},
			},
		},
		{
			name:  "a node that received pods stays in this pass",
			objs:  []any{n("n1", "4"), n("n2", "4"), cpuPod("a", "n1", "1")},
			dests: []string{"n2", "n1"},
			tries: []try{
				{node: "n1", pods: []*corev1.Pod{cpuPod("a", "n1", "1")}, removable: true, moves: map[string]string{ns + "/a": "n2"}},
				{node: "n2", reason: "received pods"},
			},
		},
		{
			name:  "an empty node needs no room",
			objs:  []any{n("n1", "4")},
			dests: []string{"n1"},
			tries: []try{{node: "n1", removable: true, moves: map[string]string{}}},
		},
	}
	for _, tc := range tests {
		for _, memo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/memo=%v", tc.name, memo), func(t *testing.T) {
				r, ctx := newRunner(t, tc.objs...)
				pass := Begin(r, tc.dests, nil)
				if memo {
					pass.UseMemo(verifiedMemo(t))
				}
				for _, tr := range tc.tries {
					res, err := pass.Try(ctx, Candidate{Node: tr.node, Pods: tr.pods})
					if err != nil {
						t.Fatal(err)
					}
					if res.Removable != tr.removable || !strings.Contains(res.Reason, tr.reason) {
						t.Fatalf("%s: removable %v (%q), want %v (%q)", tr.node, res.Removable, res.Reason, tr.removable, tr.reason)
					}
					if tr.removable && fmt.Sprint(res.Moves) != fmt.Sprint(tr.moves) {
						t.Errorf("%s: moves %v, want %v", tr.node, res.Moves, tr.moves)
					}
				}
				if err := pass.End(); err != nil {
					t.Fatal(err)
				}
				for _, tr := range tc.tries {
					if !r.Snapshot().HasNode(tr.node) {
						t.Errorf("node %s still gone after End", tr.node)
					}
				}
			})
		}
	}
}

// cpuClass classes the tests' pods by their CPU request and labels: their
// verdicts on a node read nothing else.
func cpuClass(p *corev1.Pod) string {
	return p.Spec.Containers[0].Resources.Requests.Cpu().String() + fmt.Sprint(p.Labels)
}

// verifiedMemo is a removal memo in verify mode: every remembered verdict
// is filtered again, and a difference fails the test.
func verifiedMemo(t *testing.T) *framework.Alike {
	return &framework.Alike{Class: cpuClass, Rejected: framework.NewRejections(), Verify: true,
		Found: func(pod, node, got, want string) {
			t.Errorf("memo says %s of %s on %s, the framework %s", got, pod, node, want)
		}}
}

const zone = "topology.kubernetes.io/zone"

// web is a pod of the app the guard keeps out of its zone.
func web(name, node string) *corev1.Pod {
	return builder.Pod(ns, name).Label("app", "web").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "web").Node(node).Obj()
}

// guardPod is a pod on node whose required anti-affinity keeps web pods
// out of its zone.
func guardPod(node string) *corev1.Pod {
	guard := builder.Pod(ns, "guard").CPU("100m").Node(node).Obj()
	guard.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: zone}}}}
	return guard
}

// The memo starts anew when a removal frees more than its own nodes: the
// guard's required anti-affinity keeps web pods out of zone z1 until its
// node goes, and then n1 (in z1, its generation unchanged) takes one. A
// memo kept across that removal would still say n1 turns web pods down.
func TestMemoStartsAnewWhenARemovalWidens(t *testing.T) {
	guard := guardPod("x")
	node := func(name, z, cpu string) *corev1.Node { return builder.Node(name).Label(zone, z).CPU(cpu).Obj() }
	objs := []any{node("n1", "z1", "4"), node("x", "z1", "4"), node("n2", "z2", "1"), node("r1", "z9", "4"), node("r3", "z9", "4"),
		guard, web("w1", "r1"), web("w3", "r3")}
	for _, memo := range []bool{false, true} {
		t.Run(fmt.Sprintf("memo=%v", memo), func(t *testing.T) {
			r, ctx := newRunner(t, objs...)
			pass := Begin(r, []string{"n1", "n2"}, nil)
			defer func() { _ = pass.End() }()
			var a *framework.Alike
			if memo {
				// Not verify: a stale memo would answer without asking.
				a = &framework.Alike{Class: cpuClass, Rejected: framework.NewRejections()}
				pass.UseMemo(a)
			}
			for _, tr := range []struct {
				c    Candidate
				want string
			}{
				{Candidate{Node: "r1", Pods: []*corev1.Pod{web("w1", "r1")}}, "n2"}, // n1 turns it down (the guard)
				{Candidate{Node: "x"}, ""}, // the guard dies with its node
				{Candidate{Node: "r3", Pods: []*corev1.Pod{web("w3", "r3")}}, "n1"},
			} {
				res, err := pass.Try(ctx, tr.c)
				if err != nil || !res.Removable {
					t.Fatalf("%s: %+v, %v; want removable", tr.c.Node, res, err)
				}
				if len(tr.c.Pods) > 0 && res.Moves[ns+"/"+tr.c.Pods[0].Name] != tr.want {
					t.Fatalf("%s: moves %v, want %s on %s", tr.c.Node, res.Moves, tr.c.Pods[0].Name, tr.want)
				}
			}
		})
	}
}

// With the memo, pods of a class start past the destinations known to
// turn the class down, until one of those changes: then it is asked
// again. Verify mode finds every count true.
func TestCountsForgetChangedNodes(t *testing.T) {
	objs := []any{builder.Node("a").CPU("2").Obj(), builder.Node("b").CPU("4").Obj(),
		builder.Node("from1").CPU("1").Obj(), builder.Node("from2").CPU("1").Obj(), builder.Node("from3").CPU("1").Obj(),
		cpuPod("fill", "a", "2")}
	tests := []struct {
		name string
		// freeA takes the pod filling a off it between the two removals.
		freeA, verify bool
		want          string
	}{
		{name: "a still full", want: "b"},
		{name: "a freed", freeA: true, want: "a"},
		{name: "a freed, verify", freeA: true, verify: true, want: "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t, objs...)
			pass := Begin(r, []string{"a", "b"}, nil)
			defer func() { _ = pass.End() }()
			a := &framework.Alike{Class: cpuClass, Rejected: framework.NewRejections()}
			if tc.verify {
				a = verifiedMemo(t)
			}
			pass.UseMemo(a)
			try := func(from, want string) {
				t.Helper()
				pod := cpuPod("p-"+from, from, "1")
				res, err := pass.Try(ctx, Candidate{Node: from, Pods: []*corev1.Pod{pod}})
				if err != nil || res.Moves[ns+"/"+pod.Name] != want {
					t.Fatalf("%s: %+v, %v; want its pod on %s", from, res, err, want)
				}
			}
			try("from1", "b") // a turns the class down: the memo learns it
			try("from2", "b") // the count passes a
			if got := pass.passed[cpuClass(cpuPod("p", "from1", "1"))]; got != 1 {
				t.Fatalf("count %d, want 1 (a passed)", got)
			}
			if tc.freeA {
				if err := r.Snapshot().RemovePod(ns, "fill"); err != nil {
					t.Fatal(err)
				}
			}
			try("from3", tc.want)
		})
	}
}

// A pod's claim allocated on the removed node is allocated anew on the
// destination by the DRA plugin; after End, the snapshot is as before.
func TestTryReallocatesClaims(t *testing.T) {
	class := builder.DeviceClass("gpu").Driver(gpu).Obj()
	counters := func(node string) *builder.ResourceSliceBuilder {
		return builder.ResourceSlice(node+"-counters", node, gpu, node).Pool(1, 2).
			SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7"))
	}
	parts := func(node string) *builder.ResourceSliceBuilder {
		b := builder.ResourceSlice(node+"-parts", node, gpu, node).Pool(1, 2)
		for i := range 7 {
			b.Devices(builder.Device(fmt.Sprintf("mig-%d", i)).ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
		}
		return b
	}
	tmpl := builder.ClaimTemplate(ns, "slice").Request(builder.Request("gpu", "gpu")).Obj()
	objs := []any{class, tmpl, builder.Node("n1").Obj(), builder.Node("n2").Obj(),
		counters("n1").Obj(), parts("n1").Obj(), counters("n2").Obj(), parts("n2").Obj()}
	moverSpec := builder.Pod(ns, "mover").ClaimFromTemplate("gpu", "slice").OwnedBy("apps/v1", "ReplicaSet", "rs")

	tests := []struct {
		name string
		// busy partitions on n2 before the move
		busy      int
		removable bool
	}{
		{name: "one of seven partitions moves to free partitions", busy: 4, removable: true},
		{name: "no free partition left", busy: 7, removable: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t, objs...)
			// Place the mover on n1 and the others on n2 through the
			// framework, so claims are allocated as the scheduler would.
			p, err := r.SchedulePod(ctx, moverSpec.Obj(), []string{"n1"})
			if err != nil || p.Node != "n1" {
				t.Fatalf("mover placed on %q: %v", p.Node, err)
			}
			for i := range tc.busy {
				q, err := r.SchedulePod(ctx, builder.Pod(ns, fmt.Sprintf("busy-%d", i)).ClaimFromTemplate("gpu", "slice").Obj(), []string{"n2"})
				if err != nil || q.Node != "n2" {
					t.Fatalf("busy-%d placed on %q: %v", i, q.Node, err)
				}
			}
			claimName := *p.Pod.Status.ResourceClaimStatuses[0].ResourceClaimName
			pass := Begin(r, []string{"n2"}, nil)
			res, err := pass.Try(ctx, Candidate{Node: "n1", Pods: []*corev1.Pod{p.Pod}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Removable != tc.removable {
				t.Fatalf("removable %v (%s), want %v", res.Removable, res.Reason, tc.removable)
			}
			claim, _ := r.Snapshot().ResourceClaim(ns, claimName)
			if tc.removable {
				if claim.Status.Allocation == nil || claim.Status.Allocation.Devices.Results[0].Pool != "n2" {
					t.Fatalf("claim allocated %+v during the pass, want a partition of n2", claim.Status.Allocation)
				}
			}
			if err := pass.End(); err != nil {
				t.Fatal(err)
			}
			claim, _ = r.Snapshot().ResourceClaim(ns, claimName)
			if claim.Status.Allocation == nil || claim.Status.Allocation.Devices.Results[0].Pool != "n1" || len(claim.Status.ReservedFor) != 1 {
				t.Fatalf("after End the claim is %+v, want it back on n1, reserved for the mover", claim.Status)
			}
		})
	}
}

// Destinations are filtered a window at a time: a pod that fits only the
// last of more destinations than one window holds still finds it, and
// one that fits nowhere hears from every destination.
func TestTryBeyondOneWindow(t *testing.T) {
	objs := []any{builder.Node("from").CPU("4").Obj(), cpuPod("p", "from", "2")}
	var dests []string
	for i := range 2*window + 3 {
		name := fmt.Sprintf("small-%03d", i)
		objs = append(objs, builder.Node(name).CPU("1").Obj())
		dests = append(dests, name)
	}
	r, ctx := newRunner(t, append(objs, builder.Node("big").CPU("4").Obj())...)
	pass := Begin(r, append(dests, "big"), nil)
	res, err := pass.Try(ctx, Candidate{Node: "from", Pods: []*corev1.Pod{cpuPod("p", "from", "2")}})
	if err != nil || !res.Removable || res.Moves[ns+"/p"] != "big" {
		t.Fatalf("result %+v (%v), want p moved to big", res, err)
	}
	if err := pass.End(); err != nil {
		t.Fatal(err)
	}
	pass = Begin(r, dests, nil)
	defer func() { _ = pass.End() }()
	res, err = pass.Try(ctx, Candidate{Node: "from", Pods: []*corev1.Pod{cpuPod("p", "from", "2")}})
	if err != nil || res.Removable || !strings.Contains(res.Reason, fmt.Sprintf("%d×", len(dests))) {
		t.Fatalf("result %+v (%v), want unremovable with all %d destinations rejecting", res, err, len(dests))
	}
}

// TryAll removes its nodes before placing any pod: no pod moves to a node
// of the same unit, and the unit goes or stays as one.
func TestTryAll(t *testing.T) {
	objs := []any{builder.Node("a").CPU("4").Obj(), builder.Node("b").CPU("4").Obj(), builder.Node("c").CPU("2").Obj(),
		cpuPod("pa", "a", "1"), cpuPod("pb", "b", "1")}
	unit := []Candidate{{Node: "a", Pods: []*corev1.Pod{cpuPod("pa", "a", "1")}}, {Node: "b", Pods: []*corev1.Pod{cpuPod("pb", "b", "1")}}}
	r, ctx := newRunner(t, objs...)
	pass := Begin(r, []string{"b", "a", "c"}, nil)
	res, err := pass.TryAll(ctx, unit)
	if err != nil || !res.Removable || res.Moves[ns+"/pa"] != "c" || res.Moves[ns+"/pb"] != "c" {
		t.Fatalf("result %+v (%v), want both pods on c", res, err)
	}
	if got := fmt.Sprint(pass.Removed()); got != "[a b]" {
		t.Fatalf("removed %s", got)
	}
	if err := pass.End(); err != nil {
		t.Fatal(err)
	}
	// With c too small for both, neither goes.
	r, ctx = newRunner(t, append(objs[:2:2], builder.Node("c").CPU("1").Obj(), objs[3], objs[4])...)
	pass = Begin(r, []string{"b", "a", "c"}, nil)
	defer func() { _ = pass.End() }()
	res, err = pass.TryAll(ctx, unit)
	if err != nil || res.Removable || len(pass.Removed()) != 0 || !r.Snapshot().HasNode("a") {
		t.Fatalf("result %+v (%v), removed %v: want the unit kept whole", res, err, pass.Removed())
	}
}

// Pods fill the nodes that stay before any that may still go, and a node
// found to stay joins them: after the nodes known to stay before it,
// ahead of every node that may go.
func TestStays(t *testing.T) {
	node := func(name string) any { return builder.Node(name).CPU("2").Obj() }
	objs := []any{node("s"), node("m1"), node("m2"), node("m3"), node("from1"), node("from2"), node("from3"),
		cpuPod("full", "s", "2")}
	tests := []struct {
		name  string
		stays []string
		// want is where the pods of from1, from2 and from3 go, in turn.
		want []string
	}{
		{name: "maybe in order", want: []string{"m1", "m1", "m2"}},
		{name: "one found to stay", stays: []string{"m3"}, want: []string{"m3", "m3", "m1"}},
		{name: "two, in the order found", stays: []string{"m3", "m2"}, want: []string{"m3", "m3", "m2"}},
		{name: "known already, or no destination", stays: []string{"s", "from1", "m2", "m2"}, want: []string{"m2", "m2", "m1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t, objs...)
			pass := Begin(r, []string{"s"}, []string{"m1", "m2", "m3"})
			defer func() { _ = pass.End() }()
			for _, n := range tc.stays {
				pass.Stays(n)
			}
			var got []string
			for _, from := range []string{"from1", "from2", "from3"} {
				p := cpuPod("p-"+from, from, "1")
				res, err := pass.Try(ctx, Candidate{Node: from, Pods: []*corev1.Pod{p}})
				if err != nil || !res.Removable {
					t.Fatalf("%s: %+v (%v), want removable", from, res, err)
				}
				got = append(got, res.Moves[ns+"/p-"+from])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("pods went to %v, want %v", got, tc.want)
			}
		})
	}
}

// Only the selector the scheduler writes for one node's devices, that
// node among the removed ones, is local.
func TestLocalTo(t *testing.T) {
	unit := map[string]bool{"a": true}
	label := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}}}}}
	two := builder.NodeNameSelector("a")
	two.NodeSelectorTerms[0].MatchFields[0].Values = []string{"a", "b"}
	for _, tc := range []struct {
		name string
		sel  *corev1.NodeSelector
		want bool
	}{
		{"the removed node's devices", builder.NodeNameSelector("a"), true},
		{"another node's devices", builder.NodeNameSelector("b"), false},
		{"devices every node reaches", nil, false},
		{"devices of a rack", label, false},
		{"devices of two nodes", two, false},
	} {
		if got := localTo(tc.sel, unit); got != tc.want {
			t.Errorf("%s: local %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A removal that placed a pod with required anti-affinity and is then
// reverted starts the memo anew: while the guard stood on n1, web pods
// were turned away from n2 (zone z1, its generation untouched by the
// guard), and with the guard reverted n2 takes them again.
func TestMemoStartsAnewWhenAShunningPodIsReverted(t *testing.T) {
	guard := guardPod("a")
	huge := cpuPod("huge", "a", "100")
	node := func(name, z, cpu string) *corev1.Node { return builder.Node(name).Label(zone, z).CPU(cpu).Obj() }
	objs := []any{node("n1", "z1", "200m"), node("n2", "z1", "4"), node("n3", "z2", "4"), node("a", "z9", "200"), node("b", "z9", "4"),
		guard, web("w1", "a"), huge, web("w2", "b")}
	// The memo's classes: none for the guard (its verdicts are not its
	// node's alone).
	class := func(p *corev1.Pod) string {
		if p.Spec.Affinity != nil {
			return ""
		}
		return cpuClass(p)
	}
	for _, memo := range []bool{false, true} {
		t.Run(fmt.Sprintf("memo=%v", memo), func(t *testing.T) {
			r, ctx := newRunner(t, objs...)
			pass := Begin(r, []string{"n1", "n2", "n3"}, nil)
			defer func() { _ = pass.End() }()
			if memo {
				// Not verify: a stale memo would answer without asking.
				pass.UseMemo(&framework.Alike{Class: class, Rejected: framework.NewRejections()})
			}
			// The guard goes to n1, w1 past n2 to n3, huge nowhere.
			res, err := pass.Try(ctx, Candidate{Node: "a", Pods: []*corev1.Pod{guard, web("w1", "a"), huge}})
			if err != nil || res.Removable {
				t.Fatalf("a: %+v, %v; want it kept (huge fits nowhere)", res, err)
			}
			res, err = pass.Try(ctx, Candidate{Node: "b", Pods: []*corev1.Pod{web("w2", "b")}})
			if err != nil || !res.Removable || res.Moves[ns+"/w2"] != "n2" {
				t.Fatalf("b: %+v, %v; want w2 moved to n2", res, err)
			}
		})
	}
}
