package plan_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/reserved"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const rack = "example.com/rack"

// gangScenario is a gang (members of cpu CPUs and 1Gi each, all of them
// its minCount) with existing nodes, some of their CPUs already used.
type gangScenario struct {
	members     int
	cpu         string
	topologyKey string
	nodes       []*corev1.Node
	used        map[string]string // node: CPUs of a pod already on it
	groups      func() []*nodegroups.Info
	// reserved, when set, are the provider's reservations, planned with
	// the reserved expander first.
	reserved []cloudprovider.ReservedCapacity
}

// gangPlan is what a plan decides, comparable with a table's want.
type gangPlan struct {
	Domain       string
	FitsExisting bool
	ScaleUps     []string
	Existing     []string // "pod:node", sorted
	Planned      map[string]int
	InUse        map[string]int // per reservation, after the plan
}

// planGang plans sc's gang with the scheduler's pod group cycle, in a
// runner with the cluster's gates
// (GenericWorkload, TopologyAwareWorkloadScheduling), the PodGroup in the
// snapshot as the observed cluster puts it there.
func planGang(t *testing.T, sc gangScenario) (gangPlan, plan.GangOutcome) {
	t.Helper()
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	e := newEnv(t)
	_, e.ctx = ktesting.NewTestContext(t)
	runner, err := framework.New(e.ctx, framework.Options{FeatureGates: "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner = runner
	snap := runner.Snapshot()
	var candidates []string
	for _, n := range sc.nodes {
		if err := snap.AddNode(n.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		candidates = append(candidates, n.Name)
		if cpu, ok := sc.used[n.Name]; ok {
			if err := snap.AddPod(builder.Pod("other", "on-"+n.Name).CPU(cpu).Memory("1Gi").Node(n.Name).Obj(), n.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	pg := builder.PodGroup("ns", "train").MinCount(int32(sc.members))
	if sc.topologyKey != "" {
		pg = pg.TopologyKey(sc.topologyKey)
	}
	if err := snap.SetPodGroup(pg.Obj()); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range sc.members {
		pods = append(pods, builder.Pod("ns", fmt.Sprintf("train-%d", i)).CPU(sc.cpu).Memory("1Gi").PodGroup("train").Obj())
	}
	g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: sc.members, TopologyKey: sc.topologyKey, Pending: pods}
	groups := sc.groups()
	var count *reservations.Count
	if sc.reserved != nil {
		stage := reservations.New(reservations.Options{EndMargin: 30 * time.Minute, LaunchTTL: time.Minute},
			&reservingProvider{Provider: fakeprovider.New(), res: sc.reserved}, nil, nil)
		count = stage.Count(e.ctx, groups, nil, now)
		e.chain = expander.Chain{reserved.New(), leastwaste.New()}
	}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	if count != nil {
		p = p.WithCapacity(count)
	}
	out, usage, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, candidates, groups, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	o := out[0]
	got := gangPlan{Domain: o.Domain, FitsExisting: o.FitsExisting, Planned: usage.Planned}
	if count != nil {
		got.InUse = map[string]int{}
		for _, slot := range count.Book.Slots() {
			got.InUse[slot.ID] = slot.InUse
		}
	}
	for _, up := range o.ScaleUps {
		if !up.Atomic || up.Gang != "ns/train" || up.Delta != len(up.Nodes) {
			t.Errorf("scale-up of %s: atomic %v, gang %q, +%d for %d planned nodes", up.Group.Id, up.Atomic, up.Gang, up.Delta, len(up.Nodes))
		}
		got.ScaleUps = append(got.ScaleUps, fmt.Sprintf("+%d %s", up.Delta, nodesOf([]act.ScaleUp{up})[0]))
	}
	for pod, node := range o.Existing {
		got.Existing = append(got.Existing, pod.Name+":"+node)
	}
	sort.Strings(got.Existing)
	return got, o
}

func rackGroup(id, cpu, value string, max int) *nodegroups.Info {
	g := group(id, cpu, max, 0)
	if value != "" {
		g.Template.Node.Labels[rack] = value
	}
	return g
}

func rackNode(name, cpu, value string) *corev1.Node {
	return builder.Node(name).CPU(cpu).Memory("64Gi").Label(rack, value).Obj()
}

// The planner's gang scenarios, planned by the scheduler's pod group
// cycle: the domain, the members on existing nodes, the atomic scale-ups
// with the members on each new node, the nodes booked in usage. (These
// were the plans of the planner's own domain loop, which the cycle
// replaced; it made the same ones.)
func TestGangCycle(t *testing.T) {
	tests := []struct {
		name string
		sc   gangScenario
		want gangPlan
	}{{
		// No new node is needed there; the cycle's first run, over
		// existing nodes alone, is the scheduler placing the gang now.
		name: "existing room in rack-a",
		sc: gangScenario{members: 2, cpu: "2", topologyKey: rack, nodes: []*corev1.Node{rackNode("a1", "4", "rack-a")},
			groups: func() []*nodegroups.Info { return []*nodegroups.Info{rackGroup("b", "8", "rack-b", 10)} }},
		want: gangPlan{Domain: "rack-a", FitsExisting: true, Existing: []string{"train-0:a1", "train-1:a1"}},
	}, {
		// rack-a holds one member and has no group: minCount 2 rules it
		// out (GangScheduling); rack-b's group hosts both.
		name: "only rack-b's new nodes host it",
		sc: gangScenario{members: 2, cpu: "2", topologyKey: rack, nodes: []*corev1.Node{rackNode("a1", "2", "rack-a")},
			groups: func() []*nodegroups.Info { return []*nodegroups.Info{rackGroup("b", "4", "rack-b", 10)} }},
		want: gangPlan{Domain: "rack-b", ScaleUps: []string{"+1 b: [train-0 train-1]"}, Planned: map[string]int{"b": 1}},
	}, {
		// Both racks need new nodes; rack-b's bigger nodes need fewer
		// and are fuller (NodeResourcesFit's MostAllocated
		// placement score: memory 4Gi of 64Gi against 128Gi).
		name: "fewer, fuller nodes in rack-b",
		sc: gangScenario{members: 4, cpu: "2", topologyKey: rack, groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{rackGroup("a", "4", "rack-a", 10), rackGroup("b", "8", "rack-b", 10)}
		}},
		want: gangPlan{Domain: "rack-b", ScaleUps: []string{"+1 b: [train-0 train-1 train-2 train-3]"}, Planned: map[string]int{"b": 1}},
	}, {
		name: "no topology: existing room first, then new nodes",
		sc: gangScenario{members: 5, cpu: "2", nodes: []*corev1.Node{builder.Node("used").CPU("4").Memory("64Gi").Obj()},
			groups: func() []*nodegroups.Info { return []*nodegroups.Info{group("a", "4", 10, 0)} }},
		want: gangPlan{ScaleUps: []string{"+2 a: [train-2 train-3] [train-4]"}, Existing: []string{"train-0:used", "train-1:used"},
			Planned: map[string]int{"a": 2}},
	}, {
		name: "no group takes it alone: two, biggest first",
		sc: gangScenario{members: 4, cpu: "2", groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("a", "4", 1, 0), group("b", "4", 1, 0)}
		}},
		want: gangPlan{ScaleUps: []string{"+1 a: [train-0 train-1]", "+1 b: [train-2 train-3]"}, Planned: map[string]int{"a": 1, "b": 1}},
	}, {
		// The per-request group is a domain of its own, which no node has
		// yet; the fixed rack b1 (one existing node, a group of one) is
		// too small.
		name: "a new domain per request",
		sc: gangScenario{members: 3, cpu: "3", topologyKey: rack, nodes: []*corev1.Node{rackNode("b1-node", "4", "b1")},
			groups: func() []*nodegroups.Info {
				perRequest := group("blocks", "4", 10, 0)
				perRequest.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: rack}
				return []*nodegroups.Info{rackGroup("fixed", "4", "b1", 1), perRequest}
			}},
		want: gangPlan{Domain: "new request of blocks", ScaleUps: []string{"+3 blocks: [train-0] [train-1] [train-2]"},
			Planned: map[string]int{"blocks": 3}},
	}, {
		// Two reserved-only groups share one 2-node reservation: together
		// they get 2 nodes of it, never 3, and on-demand the third.
		name: "groups sharing a reservation",
		sc: gangScenario{members: 3, cpu: "3", groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 1, 0), reservedGroup("reserved-a", 0), reservedGroup("reserved-b", 0)}
		}, reserved: []cloudprovider.ReservedCapacity{
			{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved-a", "reserved-b"}, Count: 2}}},
		want: gangPlan{ScaleUps: []string{"+2 reserved-a: [train-0] [train-1]", "+1 ondemand: [train-2]"},
			Planned: map[string]int{"reserved-a": 2, "ondemand": 1}, InUse: map[string]int{"r": 2}},
	}, {
		// Two alike groups whose provider picks the rack per request, one
		// on a reservation: their new racks score alike in the scheduler,
		// and the reservation's is bought, as the expander prefers.
		name: "a new domain on a reservation first",
		sc: gangScenario{members: 3, cpu: "3", topologyKey: rack, groups: func() []*nodegroups.Info {
			ondemand, onBlock := group("a-ondemand", "4", 10, 0), reservedGroup("b-reserved", 0)
			for _, g := range []*nodegroups.Info{ondemand, onBlock} {
				g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: rack}
			}
			return []*nodegroups.Info{ondemand, onBlock}
		}, reserved: []cloudprovider.ReservedCapacity{
			{ID: "r", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"b-reserved"}, Count: 3}}},
		want: gangPlan{Domain: "new request of b-reserved", ScaleUps: []string{"+3 b-reserved: [train-0] [train-1] [train-2]"},
			Planned: map[string]int{"b-reserved": 3}, InUse: map[string]int{"r": 3}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, o := planGang(t, tc.sc)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s\n%s", diff, o.Message)
			}
		})
	}
}

// Where fewest new nodes and the scheduler disagree, the plan follows the
// scheduler. rack-a: a1 has room for one member, and one new 16-CPU node
// of group a takes the other two (1 new node, the old domain loop's
// choice). rack-b:
// two new 4-CPU nodes of group b take all three (2 new nodes). Each rack
// places every member, so PodGroupPodsCount ties; NodeResourcesFit scores
// a placement MostAllocated over all its nodes: rack-a uses 8 of 20 CPUs,
// rack-b 6 of 8, so the scheduler prefers rack-b, and so does the cycle.
func TestGangCycleFollowsTheSchedulersPlacementScore(t *testing.T) {
	sc := gangScenario{members: 3, cpu: "2", topologyKey: rack, nodes: []*corev1.Node{rackNode("a1", "4", "rack-a")},
		used: map[string]string{"a1": "2"},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{rackGroup("a", "16", "rack-a", 10), rackGroup("b", "4", "rack-b", 10)}
		}}
	cycle, o := planGang(t, sc)
	wantCycle := gangPlan{Domain: "rack-b", ScaleUps: []string{"+2 b: [train-0 train-1] [train-2]"}, Planned: map[string]int{"b": 2}}
	if diff := cmp.Diff(wantCycle, cycle); diff != "" {
		t.Errorf("pod group cycle (-want +got):\n%s\n%s", diff, o.Message)
	}
}

// When no rack can host the gang the cycle says so in the scheduler's
// words: GangScheduling's verdict on the only placement, rack-a (the
// group's template has no rack label, so its instances join none).
func TestGangCycleReportsTheSchedulersVerdict(t *testing.T) {
	sc := gangScenario{members: 2, cpu: "2", topologyKey: rack, nodes: []*corev1.Node{rackNode("a1", "2", "rack-a")},
		groups: func() []*nodegroups.Info { return []*nodegroups.Info{rackGroup("b", "4", "", 10)} }}
	got, o := planGang(t, sc)
	if len(got.ScaleUps) != 0 || got.FitsExisting || len(got.Planned) != 0 {
		t.Fatalf("planned %+v, want nothing", got)
	}
	want := "gang ns/train needs 2 more member(s) placed to reach minCount 2; the scheduler's pod group cycle finds no placement: " +
		"0/1 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
	if o.Message != want {
		t.Errorf("message %q, want %q", o.Message, want)
	}
}

// Explain's line per placement: the rejecting plugin's words, the score,
// and a tie with the chosen one named as such (the scheduler breaks it at
// random, so a plan can only guess which of the tied it takes).
func TestTriesOf(t *testing.T) {
	scored := func(name string, score int64) framework.PlacementOutcome {
		return framework.PlacementOutcome{Name: name, Score: score, Scored: true}
	}
	for _, tc := range []struct {
		name string
		res  framework.PodGroupResult
		want []string
	}{{
		name: "distinct scores",
		res:  framework.PodGroupResult{Placements: []framework.PlacementOutcome{scored("r1", 101), scored("r2", 125)}, Chosen: 1},
		want: []string{"r1 true score 101", "r2 true score 125"},
	}, {
		name: "a tie",
		res:  framework.PodGroupResult{Placements: []framework.PlacementOutcome{scored("r1", 101), scored("r2", 101), scored("r3", 90)}, Chosen: 0},
		want: []string{"r1 true score 101", "r2 true score 101, tied with r1 (the scheduler picks one of them at random)", "r3 true score 90"},
	}, {
		name: "one feasible, unscored",
		res: framework.PodGroupResult{Placements: []framework.PlacementOutcome{{Name: "r1"},
			{Name: "r2", Code: fwk.Unschedulable, Plugin: "GangScheduling", Message: "minCount (2) cannot be satisfied"}}, Chosen: 0},
		want: []string{"r1 true ", "r2 false GangScheduling: minCount (2) cannot be satisfied"},
	}, {
		name: "none chosen",
		res:  framework.PodGroupResult{Placements: []framework.PlacementOutcome{{Name: "r1", Code: fwk.Unschedulable, Message: "no room"}}, Chosen: -1},
		want: []string{"r1 false no room"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range plan.TriesOf(&tc.res) {
				got = append(got, fmt.Sprintf("%s %v %s", d.Domain, d.Feasible, d.Message))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tries (-want +got):\n%s", diff)
			}
		})
	}
}
