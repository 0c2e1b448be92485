package plan_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// nodesOf renders each scale-up's planned nodes as "group: [pods] [pods]".
func nodesOf(ups []act.ScaleUp) []string {
	var out []string
	for _, up := range ups {
		s := up.Group.Id + ":"
		for _, pods := range up.Nodes {
			s += " ["
			for i, p := range pods {
				if i > 0 {
					s += " "
				}
				s += p.Name
			}
			s += "]"
		}
		out = append(out, s)
	}
	return out
}

// Every scale-up says which pods go on each of its new nodes, in the order
// the estimate opened them (what nominations tell the scheduler), and its
// Pods are exactly those.
func TestPlanSaysWhichPodsGoOnEachNode(t *testing.T) {
	mixed := append(cpuPods("big", "3", 2), cpuPods("small", "1", 2)...)
	tests := []struct {
		name    string
		balance *balance.Similarity
		groups  []*nodegroups.Info
		pods    []*corev1.Pod
		want    []string
	}{
		{name: "two per node", groups: []*nodegroups.Info{group("a", "4", 10, 0)}, pods: cpuPods("web", "2", 5),
			want: []string{"a: [web-0 web-1] [web-2 web-3] [web-4]"}},
		{name: "first fit decreasing fills each node's rest", groups: []*nodegroups.Info{group("a", "4", 10, 0)}, pods: mixed,
			want: []string{"a: [big-0 small-0] [big-1 small-1]"}},
		{name: "balanced groups take their nodes' pods", balance: balance.New(nil, []string{"group"}),
			groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 0)}, pods: cpuPods("web", "3", 4),
			want: []string{"a: [web-0] [web-1]", "b: [web-2] [web-3]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.opts.Balance = tc.balance
			p := e.plan(t, tc.pods, tc.groups, limits.Usage{})
			if diff := cmp.Diff(tc.want, nodesOf(p.ScaleUps)); diff != "" {
				t.Errorf("planned nodes (-want +got):\n%s", diff)
			}
			for _, up := range p.ScaleUps {
				if len(up.Nodes) != up.Delta {
					t.Errorf("%s: %d planned nodes for +%d", up.Group.Id, len(up.Nodes), up.Delta)
				}
				var flat []string
				for _, pods := range up.Nodes {
					for _, pod := range pods {
						flat = append(flat, pod.Name)
					}
				}
				var pods []string
				for _, pod := range up.Pods {
					pods = append(pods, pod.Name)
				}
				if diff := cmp.Diff(pods, flat, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
					t.Errorf("%s: pods and planned nodes' pods differ (-pods +nodes):\n%s", up.Group.Id, diff)
				}
			}
		})
	}
}

// A gang's plan says which members go on existing room and which on each
// new node.
func TestPlanGangSaysWhereEachMemberGoes(t *testing.T) {
	e := newEnv(t)
	if err := e.runner.Snapshot().AddNode(builder.Node("used").CPU("4").Memory("64Gi").Obj()); err != nil {
		t.Fatal(err)
	}
	g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 5, Pending: cpuPods("train", "2", 5)}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, []string{"used"}, []*nodegroups.Info{group("a", "4", 10, 0)}, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	existing := map[string]string{}
	for pod, node := range out[0].Existing {
		existing[pod.Name] = node
	}
	if diff := cmp.Diff(map[string]string{"train-0": "used", "train-1": "used"}, existing); diff != "" {
		t.Errorf("members on existing nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a: [train-2 train-3] [train-4]"}, nodesOf(out[0].ScaleUps)); diff != "" {
		t.Errorf("planned nodes (-want +got):\n%s", diff)
	}
}

// Gangs of one pass book the room they take: twenty two-node gangs over
// two groups with room for ten each fill both, no group is asked for
// more than its max, and pods planned after them see the groups full.
func TestGangsOfOnePassShareEachGroupsRoom(t *testing.T) {
	e := newEnv(t)
	var gangs []*gang.Gang
	for i := range 20 {
		name := fmt.Sprintf("g%02d", i)
		gangs = append(gangs, &gang.Gang{Namespace: "ns", Name: name, MinCount: 2, Pending: cpuPods(name, "3", 2)})
	}
	groups := []*nodegroups.Info{group("a", "4", 20, 0), group("b", "4", 20, 0)}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, usage, err := p.PlanGangs(e.ctx, e.runner, gangs, nil, groups, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for _, o := range out {
		if len(o.ScaleUps) == 0 {
			t.Errorf("gang %s got nothing: %s", o.Gang.Key(), o.Message)
		}
		for _, up := range o.ScaleUps {
			asked[up.Group.Id] += up.Delta
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 20, "b": 20}, asked); diff != "" {
		t.Errorf("nodes asked of each group (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"a": 20, "b": 20}, usage.Planned); diff != "" {
		t.Errorf("usage.Planned (-want +got):\n%s", diff)
	}
	// A pod planned after the gangs finds both groups at their max.
	rest := e.plan(t, cpuPods("late", "1", 1), groups, usage)
	if len(rest.ScaleUps) != 0 || len(rest.NotHelped) != 1 {
		t.Fatalf("late pod: scale-ups %v, not helped %d; want none and one", nodesOf(rest.ScaleUps), len(rest.NotHelped))
	}
	for _, r := range rest.Reasons[rest.NotHelped[0].UID] {
		if r.Reason != limits.ReasonGroupMax {
			t.Errorf("late pod: group %s: %s (%s), want %s", r.Group, r.Reason, r.Message, limits.ReasonGroupMax)
		}
	}
}

// A gang with a topology constraint whose PodGroup the simulation lacks
// (GenericWorkload off in the autoscaler) gets no plan: no domain is
// chosen by the autoscaler alone, and the message says which gates the
// scheduler's cycle needs. (With them, TestGangCycle's "a new domain per
// request" plans the same gang into one request of blocks.)
func TestGangWithTopologyNeedsTheCycle(t *testing.T) {
	const block = "example.com/block"
	e := newEnv(t)
	perRequest := group("blocks", "4", 10, 0)
	perRequest.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: block}
	g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 3, TopologyKey: block, Pending: cpuPods("train", "3", 3)}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, usage, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, nil, []*nodegroups.Info{perRequest}, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	o := out[0]
	if len(o.ScaleUps) != 0 || o.FitsExisting || len(usage.Planned) != 0 {
		t.Fatalf("plan %v fits %v usage %v; want nothing", nodesOf(o.ScaleUps), o.FitsExisting, usage.Planned)
	}
	for _, want := range []string{"topology constraint " + block, "GenericWorkload and TopologyAwareWorkloadScheduling"} {
		if !strings.Contains(o.Message, want) {
			t.Errorf("message %q, want it to say %q", o.Message, want)
		}
	}
}

// A group of units of 4 whose provider picks the domain per unit: a gang
// of 3 constrained to the domain takes one whole unit (the 4th node
// empty); a gang of 5 fits no unit, and nothing is planned.
func TestGangIntoOneUnit(t *testing.T) {
	units := func() []*nodegroups.Info {
		g := group("racks", "4", 16, 0)
		g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: rack, cloudprovider.AnnotationUnitSize: "4"}
		return []*nodegroups.Info{g}
	}
	for _, tc := range []struct {
		members int
		want    []string
	}{
		{3, []string{"+4 racks: [train-0] [train-1] [train-2] []"}},
		{5, nil},
	} {
		t.Run(fmt.Sprintf("members=%d", tc.members), func(t *testing.T) {
			got, o := planGang(t, gangScenario{members: tc.members, cpu: "3", topologyKey: rack, groups: units})
			if diff := cmp.Diff(tc.want, got.ScaleUps); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s\n%s", diff, o.Message)
			}
			if want := "a new unit of racks is 4 nodes, one domain of " + rack + ", and the members would need 5"; tc.want == nil && !strings.Contains(o.Message, want) {
				t.Errorf("message %q, want it to say %q", o.Message, want)
			}
		})
	}
}

// A gang no unit holds is told what the registered units have free: one
// unit of 4 nodes, one of them busy, leaves 3 idle nodes.
func TestGangTooBigForAUnitNamesTheUnitsRoom(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 4 {
		nodes = append(nodes, rackNode(fmt.Sprintf("r1-%d", i), "4", "r1"))
	}
	units := func() []*nodegroups.Info {
		g := group("racks", "4", 16, 4)
		g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: rack, cloudprovider.AnnotationUnitSize: "4"}
		g.Ready = nodes
		return []*nodegroups.Info{g}
	}
	got, o := planGang(t, gangScenario{members: 5, cpu: "3", topologyKey: rack, nodes: nodes,
		used: map[string]string{"r1-0": "2"}, groups: units})
	if len(got.ScaleUps) != 0 || got.FitsExisting {
		t.Fatalf("planned %+v, want nothing", got)
	}
	for _, want := range []string{"a new unit of racks is 4 nodes", "would need 5", "the most idle nodes in one of its 1 registered units is 3"} {
		if !strings.Contains(o.Message, want) {
			t.Errorf("message %q, want it to say %q", o.Message, want)
		}
	}
}
