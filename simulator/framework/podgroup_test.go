package framework

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const rackKey = "example.com/rack"

// cycleGates turn on the pod group cycle's plugins: GangScheduling
// (PlacementFeasible), TopologyPlacementGenerator (PlacementGenerate) and
// PodGroupPodsCount (PlacementScore); all are off by default in 1.37.
const cycleGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

func newCycleRunner(t *testing.T) (*Runner, context.Context) {
	t.Helper()
	t.Cleanup(func() {
		if err := ApplyFeatureGates("TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	return newRunner(t, cycleGates)
}

func rackNode(name, rack, cpu string) *v1.Node {
	b := builder.Node(name).CPU(cpu)
	if rack != "" {
		b = b.Label(rackKey, rack)
	}
	return b.Obj()
}

func members(group string, n int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = builder.Pod(ns, fmt.Sprintf("%s-%d", group, i)).CPU("1").PodGroup(group).Obj()
	}
	return out
}

// memberNodes lists where each member went ("" for none or not tried).
func memberNodes(o *PlacementOutcome) []string {
	out := make([]string, len(o.Members))
	for i, m := range o.Members {
		if m != nil {
			out[i] = m.Node
		}
	}
	return out
}

func TestSchedulePodGroup(t *testing.T) {
	type placementWant struct {
		name     string
		nodes    []string
		feasible bool
		// message is a substring of the PlacementFeasible message.
		message string
		// score is the total PlacementScore; -1 when not scored.
		score int64
		// members are the member nodes, for a feasible placement.
		members []string
		// plugins are the PlacementScore plugins' weighted parts, when
		// checked.
		plugins map[string]int64
	}
	tests := []struct {
		name    string
		nodes   []*v1.Node
		bound   []*v1.Pod
		pg      *schedulingv1beta1.PodGroup
		members int
		// chosen is the chosen placement's name; none when none is.
		chosen     string
		none       bool
		message    string
		placements []placementWant
	}{{
		// rack-b takes one member and then cannot reach minCount; the
		// unlabelled node belongs to no placement, as upstream.
		name:    "one rack fits all members",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "2"), rackNode("a2", "rack-a", "2"), rackNode("b1", "rack-b", "1"), rackNode("x1", "", "8")},
		pg:      builder.PodGroup(ns, "g").MinCount(4).TopologyKey(rackKey).Obj(),
		members: 4,
		chosen:  "rack-a",
		placements: []placementWant{
			{name: "rack-a", nodes: []string{"a1", "a2"}, feasible: true, score: -1, members: []string{"a1", "a1", "a2", "a2"}},
			{name: "rack-b", nodes: []string{"b1"}, message: "minCount (4) cannot be satisfied: 1 scheduled, 2 remaining", score: -1},
		},
	}, {
		// Both reach minCount 2. The default profile scores placements
		// with PodGroupPodsCount (members placed, normalised by the best:
		// rack-a 2*100/4 = 50, rack-b 100) and NodeResourcesFit
		// (MostAllocated over the placement's nodes, cpu and memory
		// weighted 1: both racks' CPU full, memory ~0, so 50 each).
		// Totals 100 and 150 differ, so the scheduler's random tie-break
		// never runs and it picks rack-b too.
		name:    "two racks fit: the one placing more members scores higher",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "2"), rackNode("b1", "rack-b", "2"), rackNode("b2", "rack-b", "2")},
		pg:      builder.PodGroup(ns, "g").MinCount(2).TopologyKey(rackKey).Obj(),
		members: 4,
		chosen:  "rack-b",
		placements: []placementWant{
			{name: "rack-a", nodes: []string{"a1"}, feasible: true, score: 100, members: []string{"a1", "a1", "", ""},
				plugins: map[string]int64{names.PodGroupPodsCount: 50, names.NodeResourcesFit: 50}},
			{name: "rack-b", nodes: []string{"b1", "b2"}, feasible: true, score: 150, members: []string{"b1", "b1", "b2", "b2"},
				plugins: map[string]int64{names.PodGroupPodsCount: 100, names.NodeResourcesFit: 50}},
		},
	}, {
		// Equal totals (100 + 50 each): the scheduler picks at random, we
		// pick the first by name.
		name:    "two racks tie: the first by name",
		nodes:   []*v1.Node{rackNode("b1", "rack-b", "2"), rackNode("a1", "rack-a", "2")},
		pg:      builder.PodGroup(ns, "g").MinCount(2).TopologyKey(rackKey).Obj(),
		members: 2,
		chosen:  "rack-a",
		placements: []placementWant{
			{name: "rack-a", nodes: []string{"a1"}, feasible: true, score: 150, members: []string{"a1", "a1"}},
			{name: "rack-b", nodes: []string{"b1"}, feasible: true, score: 150, members: []string{"b1", "b1"}},
		},
	}, {
		name:    "no rack fits",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "2"), rackNode("b1", "rack-b", "2")},
		pg:      builder.PodGroup(ns, "g").MinCount(3).TopologyKey(rackKey).Obj(),
		members: 3,
		none:    true,
		message: "0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
		placements: []placementWant{
			{name: "rack-a", nodes: []string{"a1"}, message: "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", score: -1},
			{name: "rack-b", nodes: []string{"b1"}, message: "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", score: -1},
		},
	}, {
		name:    "no topology constraint: one placement of all nodes",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "2"), rackNode("b1", "rack-b", "2")},
		pg:      builder.PodGroup(ns, "g").MinCount(3).Obj(),
		members: 3,
		chosen:  "",
		placements: []placementWant{
			{name: "", nodes: []string{"a1", "b1"}, feasible: true, score: -1, members: []string{"a1", "a1", "b1"}},
		},
	}, {
		// A member already on rack-b pins the group there
		// (GeneratePlacements' requiredDomain), though rack-a has room.
		name:    "a scheduled member pins its rack",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "4"), rackNode("b1", "rack-b", "3")},
		bound:   []*v1.Pod{builder.Pod(ns, "g-bound").CPU("1").PodGroup("g").Node("b1").Obj()},
		pg:      builder.PodGroup(ns, "g").MinCount(3).TopologyKey(rackKey).Obj(),
		members: 2,
		chosen:  "rack-b",
		placements: []placementWant{
			{name: "rack-b", nodes: []string{"b1"}, feasible: true, score: -1, members: []string{"b1", "b1"}},
		},
	}, {
		name:    "the bound member's rack is full",
		nodes:   []*v1.Node{rackNode("a1", "rack-a", "4"), rackNode("b1", "rack-b", "2")},
		bound:   []*v1.Pod{builder.Pod(ns, "g-bound").CPU("1").PodGroup("g").Node("b1").Obj()},
		pg:      builder.PodGroup(ns, "g").MinCount(3).TopologyKey(rackKey).Obj(),
		members: 2,
		none:    true,
		message: "0/1 placements are available",
		placements: []placementWant{
			{name: "rack-b", nodes: []string{"b1"}, message: "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining", score: -1},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newCycleRunner(t)
			s := r.Snapshot()
			var nodeNames []string
			for _, n := range tc.nodes {
				snapshottest.Load(t, s, n)
				nodeNames = append(nodeNames, n.Name)
			}
			snapshottest.Load(t, s, tc.pg)
			for _, p := range tc.bound {
				snapshottest.Load(t, s, p)
			}
			pods := members(tc.pg.Name, tc.members)
			for _, p := range pods {
				snapshottest.Load(t, s, p)
			}
			scheduled := func() int {
				st, err := s.PodGroupStates().Get(ns, tc.pg.Name)
				if err != nil {
					t.Fatal(err)
				}
				return st.ScheduledPodsCount()
			}

			res, err := r.SchedulePodGroup(ctx, tc.pg, pods, nodeNames, false)
			if err != nil {
				t.Fatalf("SchedulePodGroup: %v", err)
			}
			if got := scheduled(); got != len(tc.bound) {
				t.Errorf("without keep the snapshot changed: %d members scheduled, want %d", got, len(tc.bound))
			}
			best := res.Best()
			switch {
			case tc.none && best != nil:
				t.Fatalf("chose %q, want none", best.Name)
			case !tc.none && best == nil:
				t.Fatalf("chose none (%s), want %q", res.Message, tc.chosen)
			case !tc.none && best.Name != tc.chosen:
				t.Errorf("chose %q, want %q", best.Name, tc.chosen)
			}
			if !strings.Contains(res.Message, tc.message) || (tc.message == "") != (res.Message == "") {
				t.Errorf("message %q, want %q", res.Message, tc.message)
			}
			if len(res.Placements) != len(tc.placements) {
				t.Fatalf("%d placements, want %d: %+v", len(res.Placements), len(tc.placements), res.Placements)
			}
			for i, want := range tc.placements {
				got := &res.Placements[i]
				if got.Name != want.name || !slices.Equal(got.Nodes, want.nodes) {
					t.Errorf("placement %d: %q %v, want %q %v", i, got.Name, got.Nodes, want.name, want.nodes)
				}
				if got.Feasible() != want.feasible {
					t.Errorf("placement %q: feasible %v (%s: %s), want %v", got.Name, got.Feasible(), got.Plugin, got.Message, want.feasible)
				}
				if !want.feasible && (got.Code != fwk.Unschedulable || got.Plugin != names.GangScheduling || !strings.Contains(got.Message, want.message)) {
					t.Errorf("placement %q: %v by %q: %q, want Unschedulable by GangScheduling: %q", got.Name, got.Code, got.Plugin, got.Message, want.message)
				}
				score := int64(-1)
				if got.Scored {
					score = got.Score
				}
				if score != want.score {
					t.Errorf("placement %q: score %d, want %d", got.Name, score, want.score)
				}
				if want.plugins != nil {
					parts := map[string]int64{}
					for _, ps := range got.PluginScores {
						parts[ps.Name] = ps.Score
					}
					if !maps.Equal(parts, want.plugins) {
						t.Errorf("placement %q: plugin scores %v, want %v", got.Name, parts, want.plugins)
					}
				}
				if want.members != nil && !slices.Equal(memberNodes(got), want.members) {
					t.Errorf("placement %q: members on %v, want %v", got.Name, memberNodes(got), want.members)
				}
			}
			if tc.none {
				return
			}

			res, err = r.SchedulePodGroup(ctx, tc.pg, pods, nodeNames, true)
			if err != nil || res.Best() == nil {
				t.Fatalf("SchedulePodGroup with keep: %+v, %v", res, err)
			}
			if got, want := scheduled(), len(tc.bound)+res.Best().Placed(); got != want {
				t.Errorf("with keep: %d members scheduled, want %d", got, want)
			}
			for i, p := range pods {
				node := memberNodes(res.Best())[i]
				placed, ok := s.PlacedPod(p.Namespace, p.Name)
				if node != "" && (!ok || placed.Spec.NodeName != node) {
					t.Errorf("with keep: member %s not kept on %s", p.Name, node)
				}
			}
		})
	}
}

func TestSchedulePodGroupRejectsStrangers(t *testing.T) {
	r, ctx := newCycleRunner(t)
	pg := builder.PodGroup(ns, "g").MinCount(1).Obj()
	snapshottest.Load(t, r.Snapshot(), rackNode("a1", "rack-a", "2"), pg)
	stranger := builder.Pod(ns, "other").CPU("1").PodGroup("other").Obj()
	if _, err := r.SchedulePodGroup(ctx, pg, []*v1.Pod{stranger}, []string{"a1"}, false); err == nil {
		t.Error("a pod of another group was accepted as a member")
	}
	if _, err := r.SchedulePodGroup(ctx, nil, nil, []string{"a1"}, false); err == nil {
		t.Error("a nil pod group was accepted")
	}
	if _, err := r.SchedulePodGroup(ctx, pg, members("g", 1), []string{"missing"}, false); err == nil {
		t.Error("an unknown node was accepted")
	}
}

// A cycle whose context ends is an error, not an outcome: plugins cut
// short answer "does not fit" (the DRA allocator stops when asked), which
// nobody may plan on or compare with a copy.
func TestSchedulePodGroupCancelled(t *testing.T) {
	r, ctx := newCycleRunner(t)
	pg := builder.PodGroup(ns, "g").MinCount(2).TopologyKey(rackKey).Obj()
	snapshottest.Load(t, r.Snapshot(), rackNode("a1", "rack-a", "2"), rackNode("b1", "rack-b", "2"), pg)
	if _, err := r.SchedulePodGroup(ctx, pg, members("g", 2), []string{"a1", "b1"}, false); err != nil {
		t.Fatalf("before the end: %v", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if res, err := r.SchedulePodGroup(ended, pg, members("g", 2), []string{"a1", "b1"}, false); err == nil {
		t.Errorf("after the end: %+v, want an error", res)
	}
}
