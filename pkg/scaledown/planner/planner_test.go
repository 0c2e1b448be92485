package planner

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const unneededTime = 10 * time.Minute

// fakePolicy keeps the nodes in keep and ranks by rank (default 0).
type fakePolicy struct {
	keep map[string]string
	rank map[string]int
}

func (f fakePolicy) Keep(node *corev1.Node, _ time.Time) (string, bool) {
	r, ok := f.keep[node.Name]
	return r, ok
}

func (f fakePolicy) Rank(node *corev1.Node, _ time.Time) int { return f.rank[node.Name] }

var _ NodePolicy = fakePolicy{}

func node(name string) *corev1.Node { return builder.Node(name).CPU("4").Memory("16Gi").Obj() }

func movable(name, nodeName, cpu string) *corev1.Pod {
	return builder.Pod("app", name).CPU(cpu).OwnedBy("apps/v1", "ReplicaSet", "rs").Node(nodeName).Obj()
}

func costly(p *corev1.Pod, key, value string) *corev1.Pod {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return p
}

func pinned(name, nodeName, cpu string) *corev1.Pod {
	return builder.Pod("app", name).CPU(cpu).Node(nodeName).Obj()
}

type world struct {
	nodes     []*corev1.Node
	pods      []*corev1.Pod
	min, size int
	pdbs      []*policyv1.PodDisruptionBudget
	podGroups []*schedulingv1beta1.PodGroup
	// group sets the group's own options (nil: the planner's).
	group func(*RemovalGroup)
}

func (w world) input(now time.Time) RemovalInput {
	in := RemovalInput{Pods: w.pods, PodsByNode: map[string][]*corev1.Pod{}, PDBs: w.pdbs, PodGroups: w.podGroups, Now: now}
	size := w.size
	if size == 0 {
		size = len(w.nodes)
	}
	in.Groups = []RemovalGroup{{Id: "g", Min: w.min, Size: size, Nodes: w.nodes}}
	if w.group != nil {
		w.group(&in.Groups[0])
	}
	for _, n := range w.nodes {
		in.Destinations = append(in.Destinations, n.Name)
	}
	for _, p := range w.pods {
		in.PodsByNode[p.Spec.NodeName] = append(in.PodsByNode[p.Spec.NodeName], p)
	}
	return in
}

func names(rs []Removal) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Node.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestPlan(t *testing.T) {
	busy := func(n string) *corev1.Pod { return pinned("busy-"+n, n, "3") } // 75%: not underutilized
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}
	guarded := movable("guarded", "n1", "1")
	guarded.Labels["app"] = "guarded"
	gangPod := func(name, n string) *corev1.Pod {
		p := builder.Pod("app", name).CPU("500m").PodGroup("train").OwnedBy("batch/v1", "Job", "train").Node(n).Obj()
		return p
	}
	tests := []struct {
		name     string
		w        world
		opts     Options
		empty    string // removed now, after the unneeded time
		drain    string
		reasons  map[string]string // unremovable node -> reason
		warnings []string
	}{
		{
			name:  "empty nodes go together",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}, pods: []*corev1.Pod{busy("n3")}},
			empty: "n1,n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name:  "a group that shrinks to zero at once: all its nodes together",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2")}, group: func(g *RemovalGroup) { g.Whole = true }},
			empty: "n1,n2",
		},
		{
			name: "a group that shrinks to zero at once keeps all while one is busy",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}, pods: []*corev1.Pod{busy("n3")},
				group: func(g *RemovalGroup) { g.Whole = true }},
			reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "a group that shrinks to zero at once keeps all while a node is not registered",
			w:    world{nodes: []*corev1.Node{node("n1"), node("n2")}, size: 3, group: func(g *RemovalGroup) { g.Whole = true }},
		},
		{
			name: "a group that shrinks to zero at once keeps all when the parallelism allows fewer",
			w:    world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}, group: func(g *RemovalGroup) { g.Whole = true }},
			opts: Options{MaxParallelism: 2},
		},
		{
			name: "units: an idle unit goes whole, one with a busy node stays whole",
			w: world{nodes: []*corev1.Node{node("a1"), node("a2"), node("b1"), node("b2")}, pods: []*corev1.Pod{busy("b2")},
				group: func(g *RemovalGroup) { g.Units = map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"} }},
			empty:   "a1,a2",
			reasons: map[string]string{"b1": UnitNotWhole, "b2": eligibility.NotUnderutilized},
		},
		{
			name: "units: a unit's pods move out of it or it stays (never half of it, its pods on the other half)",
			w: world{nodes: []*corev1.Node{node("a1"), node("a2"), node("b1"), node("b2")},
				pods:  []*corev1.Pod{movable("m1", "a1", "1"), movable("m2", "a2", "1"), pinned("full-b1", "b1", "4"), pinned("full-b2", "b2", "4")},
				group: func(g *RemovalGroup) { g.Units = map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"} }},
			reasons: map[string]string{"a1": NoPlaceToMovePods, "a2": NoPlaceToMovePods, "b1": eligibility.NotUnderutilized,
				"b2": eligibility.NotUnderutilized},
		},
		{
			name: "units: a unit one of whose nodes a reservation keeps stays whole",
			w: world{nodes: []*corev1.Node{node("a1"), node("a2")},
				group: func(g *RemovalGroup) { g.Units = map[string]string{"a1": "a", "a2": "a"} }},
			opts:    Options{Policies: []NodePolicy{fakePolicy{keep: map[string]string{"a2": "ActiveReservation"}}}},
			reasons: map[string]string{"a1": UnitNotWhole, "a2": "ActiveReservation"},
		},
		{
			name: "units: a unit with a node not registered stays",
			w: world{nodes: []*corev1.Node{node("a1"), node("a2")},
				group: func(g *RemovalGroup) { g.Units = map[string]string{"a1": "a", "a2": "a", "a3": "a"} }},
			reasons: map[string]string{"a1": UnitNotWhole, "a2": UnitNotWhole},
		},
		{
			name:  "never below the group's min",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}, min: 2},
			empty: "n1",
		},
		{
			name:  "parallelism bounds the removals",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}},
			opts:  Options{MaxParallelism: 2},
			empty: "n1,n2",
		},
		{
			name:  "a movable pod: the node is drained",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{movable("web", "n1", "1"), pinned("busy", "n2", "2")}},
			drain: "n1", reasons: map[string]string{"n2": eligibility.NotUnderutilized},
		},
		{
			name: "a higher disruption cost keeps its node when the rest is equal",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{costly(movable("a", "n1", "1"), DisruptionCostAnnotation, "100"), movable("b", "n2", "1"), pinned("c", "n3", "2")}},
			drain: "n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "pod-deletion-cost counts too",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{costly(movable("a", "n1", "1"), PodDeletionCostAnnotation, "7"), movable("b", "n2", "1"), pinned("c", "n3", "2")}},
			drain: "n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "the shared annotation wins over pod-deletion-cost",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{
					costly(costly(movable("a", "n1", "1"), PodDeletionCostAnnotation, "-100"), DisruptionCostAnnotation, "50"),
					costly(movable("b", "n2", "1"), PodDeletionCostAnnotation, "10"), pinned("c", "n3", "2")}},
			drain: "n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "a malformed cost is ignored, the other annotation counts, and it is warned about",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{movable("a", "n1", "1"),
					costly(costly(movable("b", "n2", "1"), DisruptionCostAnnotation, "lots"), PodDeletionCostAnnotation, "-3"), pinned("c", "n3", "2")}},
			drain: "n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized}, warnings: []string{"InvalidAnnotation"},
		},
		{
			name: "one drain at a time",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{movable("a", "n1", "1"), movable("b", "n2", "1"), pinned("c", "n3", "2")}},
			drain: "n1", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "the simulation limit leaves later nodes for the next pass",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods: []*corev1.Pod{movable("a", "n1", "1"), movable("b", "n2", "1"), pinned("c", "n3", "2")}},
			opts:  Options{MaxNonEmptyCandidates: 1},
			drain: "n1", reasons: map[string]string{"n2": NotEvaluated, "n3": eligibility.NotUnderutilized},
		},
		{
			name:    "no room elsewhere",
			w:       world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{movable("web", "n1", "1"), pinned("busy", "n2", "3500m")}},
			reasons: map[string]string{"n1": NoPlaceToMovePods, "n2": eligibility.NotUnderutilized},
		},
		{
			name:    "a pod without controller keeps its node",
			w:       world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{pinned("p", "n1", "1"), pinned("busy", "n2", "2")}},
			reasons: map[string]string{"n1": drainability.NotReplicated, "n2": eligibility.NotUnderutilized},
		},
		{
			name: "a budget allowing no disruption keeps its node; one selecting nothing is reported",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{guarded, pinned("busy", "n2", "2")},
				pdbs: []*policyv1.PodDisruptionBudget{
					{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "guarded"}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel}},
					{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "nobody"}, Spec: policyv1.PodDisruptionBudgetSpec{
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nobody"}}}},
				}},
			reasons:  map[string]string{"n1": drainability.NotEnoughPdb, "n2": eligibility.NotUnderutilized},
			warnings: []string{"SelectsNoPods"},
		},
		{
			name: "one member of a running gang keeps its node",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2")},
				pods:      []*corev1.Pod{gangPod("t0", "n1"), gangPod("t1", "n2"), gangPod("t2", "n2"), pinned("busy", "n2", "2")},
				podGroups: []*schedulingv1beta1.PodGroup{builder.PodGroup("app", "train").MinCount(3).Obj()}},
			reasons: map[string]string{"n1": drainability.RunningGangMember, "n2": eligibility.NotUnderutilized},
		},
		{
			name: "a gang spread over two idle nodes moves whole, in one drain slot",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")},
				pods:      []*corev1.Pod{gangPod("t0", "n1"), gangPod("t1", "n2"), pinned("busy", "n3", "2")},
				podGroups: []*schedulingv1beta1.PodGroup{builder.PodGroup("app", "train").MinCount(2).Obj()}},
			drain: "n1,n2", reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name: "a spread gang with nowhere to go stays whole",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2")},
				pods:      []*corev1.Pod{gangPod("t0", "n1"), gangPod("t1", "n2")},
				podGroups: []*schedulingv1beta1.PodGroup{builder.PodGroup("app", "train").MinCount(2).Obj()}},
			reasons: map[string]string{"n1": drainability.RunningGangMember, "n2": drainability.RunningGangMember},
		},
		{
			name: "a gang's unit respects the group minimum",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}, min: 2,
				pods:      []*corev1.Pod{gangPod("t0", "n1"), gangPod("t1", "n2"), pinned("busy", "n3", "2")},
				podGroups: []*schedulingv1beta1.PodGroup{builder.PodGroup("app", "train").MinCount(2).Obj()}},
			reasons: map[string]string{"n3": eligibility.NotUnderutilized},
		},
		{
			name:    "a policy keeps a node with its reason",
			w:       world{nodes: []*corev1.Node{node("n1"), node("n2")}},
			opts:    Options{Policies: []NodePolicy{fakePolicy{keep: map[string]string{"n1": "ActiveReservation"}}}},
			empty:   "n2",
			reasons: map[string]string{"n1": "ActiveReservation"},
		},
		{
			name:  "lower rank goes first",
			w:     world{nodes: []*corev1.Node{node("n1"), node("n2"), node("n3")}},
			opts:  Options{MaxParallelism: 1, Policies: []NodePolicy{fakePolicy{rank: map[string]int{"n1": 5, "n2": 1, "n3": 3}}}},
			empty: "n2",
		},
		{
			// A provider's per-group options: twice the unneeded time.
			name: "the group's own unneeded time",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2")},
				group: func(g *RemovalGroup) { g.UnneededTime = 2 * unneededTime }},
		},
		{
			name: "the group's own thresholds",
			w: world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{movable("web", "n1", "1"), pinned("busy", "n2", "2")},
				group: func(g *RemovalGroup) { g.Thresholds = &eligibility.Thresholds{Utilization: 0.2, GPU: 0.2} }},
			reasons: map[string]string{"n1": eligibility.NotUnderutilized, "n2": eligibility.NotUnderutilized},
		},
		{
			name:     "malformed annotation: kept, warned",
			w:        world{nodes: []*corev1.Node{annotatedNode("n1", eligibility.ScaleDownDisabledAnnotation, "perhaps"), node("n2")}},
			empty:    "n2",
			reasons:  map[string]string{"n1": eligibility.ScaleDownDisabled},
			warnings: []string{"InvalidAnnotation"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var objs []any
			for _, n := range tc.w.nodes {
				objs = append(objs, n)
			}
			for _, p := range tc.w.pods {
				objs = append(objs, p)
			}
			snapshottest.Load(t, r.Snapshot(), objs...)
			opts := tc.opts
			opts.Thresholds = eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}
			opts.Rules = drainability.Rules{SkipNodesWithLocalStorage: true, SkipNodesWithSystemPods: true}
			opts.UnneededTime = unneededTime
			if opts.MaxParallelism == 0 {
				opts.MaxParallelism = 10
			}
			if opts.MaxNonEmptyCandidates == 0 {
				opts.MaxNonEmptyCandidates = 30
			}
			p := New(r, opts)
			first, err := p.Plan(ctx, tc.w.input(t0))
			if err != nil {
				t.Fatal(err)
			}
			if len(first.Empty)+len(first.Drain) != 0 {
				t.Fatalf("removed %s%s before the unneeded time", names(first.Empty), names(first.Drain))
			}
			plan, err := p.Plan(ctx, tc.w.input(t0.Add(unneededTime)))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(plan.Empty); got != tc.empty {
				t.Errorf("empty removals %q, want %q", got, tc.empty)
			}
			if got := names(plan.Drain); got != tc.drain {
				t.Errorf("drains %q, want %q", got, tc.drain)
			}
			got := map[string]string{}
			for n, u := range plan.Unremovable {
				got[n] = u.Reason
			}
			if fmt.Sprint(got) != fmt.Sprint(orEmpty(tc.reasons)) {
				t.Errorf("unremovable %v, want %v", plan.Unremovable, tc.reasons)
			}
			var warnings []string
			for _, w := range plan.Warnings {
				warnings = append(warnings, w.Reason)
			}
			if fmt.Sprint(warnings) != fmt.Sprint(tc.warnings) {
				t.Errorf("warnings %v, want %v", warnings, tc.warnings)
			}
			if r.Snapshot().Depth() != 0 || len(r.Snapshot().InFlightClaims()) != 0 {
				t.Errorf("the plan left the snapshot changed (depth %d)", r.Snapshot().Depth())
			}
			for _, n := range tc.w.nodes {
				if !r.Snapshot().HasNode(n.Name) {
					t.Errorf("node %s gone from the snapshot after planning", n.Name)
				}
			}
		})
	}
}

// Drain removals carry the pods to evict and where they were simulated.
func TestPlanDrainMoves(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{movable("web", "n1", "1"), pinned("busy", "n2", "2")}}
	snapshottest.Load(t, r.Snapshot(), w.nodes[0], w.nodes[1], w.pods[0], w.pods[1])
	p := New(r, Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, MaxParallelism: 10, MaxNonEmptyCandidates: 30})
	plan, err := p.Plan(ctx, w.input(t0))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Drain) != 1 || len(plan.Drain[0].Evict) != 1 || plan.Drain[0].Evict[0].Name != "web" || plan.Drain[0].Moves["app/web"] != "n2" {
		t.Fatalf("drain %+v, want n1 with web evicted to n2", plan.Drain)
	}
}

func annotatedNode(name, k, v string) *corev1.Node {
	n := node(name)
	n.Annotations = map[string]string{k: v}
	return n
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// An unready node goes only with --scale-down-unready-enabled, after
// --scale-down-unready-time rather than --scale-down-unneeded-time.
func TestPlanUnreadyNodes(t *testing.T) {
	const unreadyTime = 20 * time.Minute
	down := builder.Node("down").CPU("4").Memory("16Gi").NotReady().Obj()
	tests := []struct {
		name    string
		enabled bool
		// want are the empty removals after 0, 10 and 20 minutes.
		want    [3]string
		reasons map[string]string
	}{
		{"enabled: after the unready time", true, [3]string{"", "up", "down,up"}, map[string]string{}},
		{"disabled: never", false, [3]string{"", "up", "up"}, map[string]string{"down": eligibility.ScaleDownUnreadyDisabled}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := world{nodes: []*corev1.Node{node("up"), down}}
			snapshottest.Load(t, r.Snapshot(), w.nodes[0], w.nodes[1])
			p := New(r, Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, MaxParallelism: 10, MaxNonEmptyCandidates: 30,
				UnneededTime: unneededTime, UnreadyEnabled: tc.enabled, UnreadyTime: unreadyTime})
			for i, at := range []time.Duration{0, unneededTime, unreadyTime} {
				plan, err := p.Plan(ctx, w.input(t0.Add(at)))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range plan.Empty {
					got = append(got, r.Node.Name)
				}
				sort.Strings(got)
				if strings.Join(got, ",") != tc.want[i] {
					t.Errorf("after %s: removed %v, want %q", at, got, tc.want[i])
				}
				reasons := map[string]string{}
				for n, u := range plan.Unremovable {
					reasons[n] = u.Reason
				}
				if fmt.Sprint(reasons) != fmt.Sprint(tc.reasons) {
					t.Errorf("after %s: unremovable %v, want %v", at, reasons, tc.reasons)
				}
			}
		})
	}
}

// A pod the snapshot leaves out (expendable, below the priority cutoff)
// needs no room elsewhere but is still evicted with its node; one that
// cannot be evicted still blocks the removal.
func TestPlanEvictsPodsLeftOutOfTheSnapshot(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	tests := []struct {
		name      string
		extra     *corev1.Pod
		wantEvict string // "" means n1 is not removed
	}{
		{"expendable pod evicted, not moved", movable("batch", "n1", "3"), "app/web app/batch"},
		{"unowned expendable pod blocks", pinned("batch", "n1", "3"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := world{nodes: []*corev1.Node{node("n1"), node("n2")}, pods: []*corev1.Pod{movable("web", "n1", "1"), pinned("busy", "n2", "2"), tc.extra}}
			// The snapshot holds all but the extra pod.
			snapshottest.Load(t, r.Snapshot(), w.nodes[0], w.nodes[1], w.pods[0], w.pods[1])
			p := New(r, Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, MaxParallelism: 10, MaxNonEmptyCandidates: 30})
			plan, err := p.Plan(ctx, w.input(t0))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range plan.Drain {
				if d.Node.Name == "n1" {
					for _, e := range d.Evict {
						got = append(got, e.Namespace+"/"+e.Name)
					}
					if d.Moves["app/batch"] != "" {
						t.Errorf("batch moved to %s; a pod left out of the snapshot needs no room", d.Moves["app/batch"])
					}
				}
			}
			if strings.Join(got, " ") != tc.wantEvict {
				t.Errorf("n1 evicts %q, want %q (%d drains)", strings.Join(got, " "), tc.wantEvict, len(plan.Drain))
			}
		})
	}
}

// A node a pending pod is nominated for stays: the scheduler means to
// bind the pod there, and the devices it will claim are not in the
// snapshot yet. A node whose pending pods the simulation alone put there
// may go, its pods placed elsewhere.
func TestPlanKeepsNodesWithNominatedPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := world{nodes: []*corev1.Node{node("n1"), node("n2")}}
	snapshottest.Load(t, r.Snapshot(), w.nodes[0], w.nodes[1])
	landing := builder.Pod("app", "landing").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").Nominated("n1").Obj()
	placed := builder.Pod("app", "placed").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").Obj()
	if err := r.Snapshot().AddPod(landing, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshot().AddPod(placed, "n2"); err != nil {
		t.Fatal(err)
	}
	p := New(r, Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, UnneededTime: unneededTime, MaxParallelism: 10, MaxNonEmptyCandidates: 30})
	for _, at := range []time.Time{t0, t0.Add(unneededTime)} {
		plan, err := p.Plan(ctx, w.input(at))
		if err != nil {
			t.Fatal(err)
		}
		if u := plan.Unremovable["n1"]; u.Reason != PodsNominated {
			t.Errorf("at %s: n1 unremovable for %q (%s), want %s", at, u.Reason, u.Detail, PodsNominated)
		}
		if u, ok := plan.Unremovable["n2"]; ok {
			t.Errorf("at %s: n2 unremovable for %s: %s", at, u.Reason, u.Detail)
		}
		if at.After(t0) && names(plan.Empty)+names(plan.Drain) != "n2" {
			t.Errorf("removed %q and drained %q, want n2 alone", names(plan.Empty), names(plan.Drain))
		}
	}
}

// A pod being deleted goes with its node, unless the node is not Ready:
// then nothing confirms the pod stopped (a partition, a zone outage), and
// its node stays, with the reason.
func TestPlanKeepsUnreadyNodesWithTerminatingPods(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ready  bool
		reason string // "" removable
	}{
		{name: "Ready node: the pod goes with it", ready: true},
		{name: "NotReady node: kept", reason: drainability.TerminatingOnUnreadyNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := builder.Node("zone-b").CPU("4").Memory("16Gi")
			if !tc.ready {
				b = b.NotReady()
			}
			terminating := movable("web", "zone-b", "1")
			terminating.DeletionTimestamp = &metav1.Time{Time: t0.Add(-time.Minute)}
			w := world{nodes: []*corev1.Node{node("up"), b.Obj()}, pods: []*corev1.Pod{terminating}}
			snapshottest.Load(t, r.Snapshot(), w.nodes[0], w.nodes[1])
			p := New(r, Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, MaxParallelism: 10, MaxNonEmptyCandidates: 30,
				UnreadyEnabled: true, UnreadyTime: unneededTime})
			plan, err := p.Plan(ctx, w.input(t0.Add(unneededTime)))
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Unremovable["zone-b"].Reason; got != tc.reason {
				t.Errorf("zone-b unremovable because %q, want %q (empty removals: %s)", got, tc.reason, names(plan.Empty))
			}
		})
	}
}
