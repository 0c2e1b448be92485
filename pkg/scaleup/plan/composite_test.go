package plan_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const block = "example.com/block"

func blockRackNode(name, cpu, b, r string) *corev1.Node {
	return builder.Node(name).CPU(cpu).Memory("64Gi").Label(block, b).Label(rack, r).Obj()
}

func blockRackGroup(id, cpu, b, r string, max int) *nodegroups.Info {
	g := group(id, cpu, max, 0)
	g.Template.Node.Labels[block] = b
	g.Template.Node.Labels[rack] = r
	return g
}

// compositeEnv is newEnv with a runner whose gates run the pod group
// cycle over CompositePodGroups; the gates are put back when t ends.
func compositeEnv(t *testing.T) *env {
	t.Helper()
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("CompositePodGroup=false,TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	e := newEnv(t)
	_, e.ctx = ktesting.NewTestContext(t)
	runner, err := framework.New(e.ctx, framework.Options{FeatureGates: "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner = runner
	return e
}

// A CompositePodGroup "job" (topology block, both children required) of
// two PodGroups (topology rack, 2 members of 2 CPUs each): block b1 has a
// free node in r1 and one member's room in r2, whose group adds the rest;
// block b2's r3 is full and its group may add one node, but b2 has no
// second rack. The scheduler's cycle, level by level, puts worker-a on
// r1, worker-b on r2 (one existing, one new node): only b1 grows.
func TestGangCyclePlansEveryLevel(t *testing.T) {
	e := compositeEnv(t)
	snap := e.runner.Snapshot()
	nodes := []*corev1.Node{blockRackNode("b1-r1", "4", "b1", "r1"), blockRackNode("b1-r2", "4", "b1", "r2"), blockRackNode("b2-r3", "4", "b2", "r3")}
	used := map[string]string{"b1-r2": "2", "b2-r3": "4"}
	// A node without the topology labels, with room for everyone: no
	// placement holds it, at any level (the gang's later runs leave it
	// out with the alikePlacements shortcut; the plan is the same).
	nodes = append(nodes, builder.Node("loose").CPU("16").Memory("64Gi").Obj())
	var candidates []string
	for _, n := range nodes {
		if err := snap.AddNode(n); err != nil {
			t.Fatal(err)
		}
		candidates = append(candidates, n.Name)
		if cpu, ok := used[n.Name]; ok {
			if err := snap.AddPod(builder.Pod("other", "on-"+n.Name).CPU(cpu).Memory("1Gi").Node(n.Name).Obj(), n.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := snap.SetCompositePodGroup(builder.CompositePodGroup("ns", "job").MinGroupCount(2).TopologyKey(block).Obj()); err != nil {
		t.Fatal(err)
	}
	var pending []*corev1.Pod
	for _, w := range []string{"worker-a", "worker-b"} {
		if err := snap.SetPodGroup(builder.PodGroup("ns", w).MinCount(2).TopologyKey(rack).Parent("job").Obj()); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			pending = append(pending, builder.Pod("ns", fmt.Sprintf("%s-%d", w, i)).CPU("2").Memory("1Gi").PodGroup(w).Obj())
		}
	}
	g := &gang.Gang{Namespace: "ns", Name: "job", Composite: true, MinCount: 4, TopologyKey: block, Pending: pending}
	groups := []*nodegroups.Info{blockRackGroup("g-r3", "4", "b2", "r3", 1), blockRackGroup("g-r2", "4", "b1", "r2", 10)}
	for _, shortcuts := range []*shortcut.Set{nil, shortcut.Plain()} {
		t.Run(fmt.Sprintf("plain=%v", shortcuts != nil), func(t *testing.T) {
			snap.Fork()
			defer func() {
				if err := snap.Revert(); err != nil {
					t.Fatal(err)
				}
			}()
			p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{Shortcuts: shortcuts}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
			out, usage, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, candidates, groups, limits.Usage{}, now)
			if err != nil {
				t.Fatal(err)
			}
			o := out[0]
			got := gangPlan{Domain: o.Domain, FitsExisting: o.FitsExisting, Planned: usage.Planned}
			for _, up := range o.ScaleUps {
				got.ScaleUps = append(got.ScaleUps, fmt.Sprintf("+%d %s", up.Delta, nodesOf([]act.ScaleUp{up})[0]))
			}
			for pod, node := range o.Existing {
				got.Existing = append(got.Existing, pod.Name+":"+node)
			}
			sort.Strings(got.Existing)
			want := gangPlan{Domain: "b1", ScaleUps: []string{"+1 g-r2: [worker-b-1]"},
				Existing: []string{"worker-a-0:b1-r1", "worker-a-1:b1-r1", "worker-b-0:b1-r2"}, Planned: map[string]int{"g-r2": 1}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s\n%s %v", diff, o.Message, o.Tried)
			}
			// Every level's tries, each child's under its block.
			var tried []string
			for _, d := range o.Tried {
				tried = append(tried, fmt.Sprintf("%s %v %s", d.Domain, d.Feasible, d.Message))
			}
			want2 := []string{
				"b1 true ",
				"b1 › r1 true PodGroup ns/worker-a: score 151",
				"b1 › r2 true PodGroup ns/worker-a: score 125",
				"b1 › r1 false PodGroup ns/worker-b: GangScheduling: minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",
				"b1 › r2 true PodGroup ns/worker-b",
				"b2 false GangScheduling: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining",
				"b2 › r3 true PodGroup ns/worker-a",
				"b2 › r3 false PodGroup ns/worker-b: GangScheduling: minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",
			}
			if diff := cmp.Diff(want2, tried); diff != "" {
				t.Errorf("tried (-want +got):\n%s", diff)
			}
		})
	}
}

// A tree the simulation lacks (its CompositePodGroup not loaded) is not
// planned and says why; the pass goes on.
func TestGangCycleWithoutItsTree(t *testing.T) {
	e := newEnv(t)
	g := &gang.Gang{Namespace: "ns", Name: "job", Composite: true, MinCount: 1,
		Pending: []*corev1.Pod{builder.Pod("ns", "w-0").CPU("1").PodGroup("w").Obj()}}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, nil, []*nodegroups.Info{group("a", "4", 10, 0)}, limits.Usage{}, now)
	if err != nil {
		t.Fatalf("PlanGangs: %v", err)
	}
	if len(out) != 1 || len(out[0].ScaleUps) != 0 || out[0].FitsExisting || out[0].Message == "" {
		t.Fatalf("outcome %+v, want nothing planned and a reason", out)
	}
	t.Log(out[0].Message)
}

// A gang without a PodGroup of its own (a ProvisioningRequest's pods) but
// with one to simulate is planned by the scheduler's cycle: the group is
// put in the snapshot and its members are kept there, scheduled.
func TestGangCycleWithASimulatedGroup(t *testing.T) {
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	e := newEnv(t)
	runner, err := framework.New(e.ctx, framework.Options{FeatureGates: "GenericWorkload=true"})
	if err != nil {
		t.Fatal(err)
	}
	e.runner = runner
	pg := builder.PodGroup("ns", "req.provisioningrequest").MinCount(3).Obj()
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, builder.Pod("ns", fmt.Sprintf("req-%d", i)).CPU("3").Memory("1Gi").PodGroup(pg.Name).Obj())
	}
	g := &gang.Gang{Namespace: "ns", Name: "ProvisioningRequest/req", MinCount: 3, Pending: pods, Group: pg}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, nil, []*nodegroups.Info{group("a", "4", 10, 0)}, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out[0].ScaleUps) != 1 || out[0].ScaleUps[0].Delta != 3 {
		t.Fatalf("outcome %+v, want one +3 scale-up", out[0])
	}
	st, err := e.runner.Snapshot().PodGroupStates().Get("ns", pg.Name)
	if err != nil || st.ScheduledPodsCount() != 3 {
		t.Errorf("the simulated group's members are not kept by the cycle: %v", err)
	}
}

// Verify mode tells of a placement, at any level, holding a node the
// gang's first run placed nowhere (the later runs would have left it out).
func TestCheckNarrowed(t *testing.T) {
	res := func(child []string) *framework.PodGroupResult {
		return &framework.PodGroupResult{Group: "CompositePodGroup ns/job", Placements: []framework.PlacementOutcome{
			{Name: "b1", Nodes: []string{"n1", "n2"}, Children: []*framework.PodGroupResult{nil, {
				Group: "PodGroup ns/w", Placements: []framework.PlacementOutcome{{Name: "r1", Nodes: child}}}}},
		}}
	}
	for _, tc := range []struct {
		name  string
		res   *framework.PodGroupResult
		left  map[string]bool
		found string // "group placement node"
		check int
	}{
		{name: "nothing left out", res: res([]string{"n1"}), left: nil},
		{name: "left out and held nowhere", res: res([]string{"n1"}), left: map[string]bool{"loose": true}, check: 1},
		{name: "held by the root", res: res([]string{"n1"}), left: map[string]bool{"n2": true}, check: 1,
			found: "CompositePodGroup ns/job b1 placement holds node n2"},
		{name: "held by a child", res: res([]string{"loose"}), left: map[string]bool{"loose": true}, check: 1,
			found: "PodGroup ns/w r1 placement holds node loose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var found string
			checks := 0
			alike := &framework.Alike{Verify: true, Checked: func() { checks++ },
				Found: func(group, placement, got, _ string) { found = group + " " + placement + " " + got }}
			plan.CheckNarrowed(alike, tc.res, tc.left)
			if found != tc.found || checks != tc.check {
				t.Errorf("found %q after %d checks, want %q after %d", found, checks, tc.found, tc.check)
			}
		})
	}
}
