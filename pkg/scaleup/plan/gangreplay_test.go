package plan_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Four alike gangs (a CompositePodGroup over blocks, two PodGroups over
// racks, two 2-CPU members each) and, second, a small one of another
// kind arrive together. The first goes to new nodes (the scheduler
// scores them fuller than b1-r1's room); the small one takes b1-r1's
// room, so the candidates changed and the third runs the cycle again;
// the two after it are planned as the third was, on new nodes of their
// own. The plans are those of the cycle run for every gang (no
// shortcut), and verify mode finds no replay that the runs would not
// have decided. What explain lists of the tries names each gang's own
// groups.
func TestGangCycleReplaysAlikeGangs(t *testing.T) {
	e := compositeEnv(t)
	snap := e.runner.Snapshot()
	existing := blockRackNode("b1-r1", "4", "b1", "r1")
	if err := snap.AddNode(existing); err != nil {
		t.Fatal(err)
	}
	candidates := []string{existing.Name}
	var gangs []*gang.Gang
	for j := range 4 {
		if j == 1 {
			if err := snap.SetPodGroup(builder.PodGroup("ns", "small").MinCount(2).TopologyKey(rack).Obj()); err != nil {
				t.Fatal(err)
			}
			var pending []*corev1.Pod
			for i := range 2 {
				pending = append(pending, builder.Pod("ns", fmt.Sprintf("small-%d", i)).CPU("1").Memory("1Gi").PodGroup("small").Obj())
			}
			gangs = append(gangs, &gang.Gang{Namespace: "ns", Name: "small", MinCount: 2, TopologyKey: rack, Pending: pending})
		}
		job := fmt.Sprintf("job-%d", j)
		if err := snap.SetCompositePodGroup(builder.CompositePodGroup("ns", job).MinGroupCount(2).TopologyKey(block).Obj()); err != nil {
			t.Fatal(err)
		}
		var pending []*corev1.Pod
		for _, w := range []string{"a", "b"} {
			pg := job + "-" + w
			if err := snap.SetPodGroup(builder.PodGroup("ns", pg).MinCount(2).TopologyKey(rack).Parent(job).Obj()); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				pending = append(pending, builder.Pod("ns", fmt.Sprintf("%s-%d", pg, i)).CPU("2").Memory("1Gi").PodGroup(pg).Obj())
			}
		}
		gangs = append(gangs, &gang.Gang{Namespace: "ns", Name: job, Composite: true, MinCount: 4, TopologyKey: block, Pending: pending})
	}
	maxR3, capped := 100, false
	groups := func() []*nodegroups.Info {
		return []*nodegroups.Info{blockRackGroup("g-b1-r1", "4", "b1", "r1", 100), blockRackGroup("g-b1-r2", "4", "b1", "r2", 100),
			blockRackGroup("g-b2-r3", "4", "b2", "r3", maxR3), blockRackGroup("g-b2-r4", "4", "b2", "r4", 100)}
	}
	// planned plans the gangs in a fork it reverts: each gang's domain
	// and scale-ups with the members on each new node.
	planned := func(t *testing.T, opts estimator.Options) ([]string, *plan.Planner) {
		snap.Fork()
		defer func() {
			if err := snap.Revert(); err != nil {
				t.Fatal(err)
			}
		}()
		p := plan.New(e.opts, estimator.New(e.runner, opts), e.chain, limits.New(e.conf, nil), e.backoff, nil)
		if capped {
			p = p.WithCapacity(capR3{})
		}
		out, _, err := p.PlanGangs(e.ctx, e.runner, gangs, candidates, groups(), limits.Usage{}, now)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range out {
			line := fmt.Sprintf("%s %s existing=%d", o.Gang.Name, o.Domain, len(o.Existing))
			for _, up := range o.ScaleUps {
				line += " " + up.Group.Id
				for _, n := range up.Nodes {
					line += fmt.Sprint(podNames(n))
				}
			}
			for _, d := range o.Tried {
				line += fmt.Sprintf(" | %s %v %s", d.Domain, d.Feasible, d.Message)
			}
			got = append(got, line+" "+o.Message)
		}
		return got, p
	}
	for _, tc := range []struct {
		name string
		// maxR3 is the size the group the gangs choose may reach; capped
		// puts it on a reservation with room for 100 nodes.
		maxR3  int
		capped bool
		// replayed and options: the gangs planned as the one before them,
		// and with its options.
		replayed, options int
	}{
		// The third runs the cycle (the small one took room); the last
		// two replay it, options included.
		{name: "room for every gang", maxR3: 100, replayed: 2, options: 2},
		// g-b2-r3 holds 2 nodes a gang: room 5, 3 and 1 for the three
		// after the small one. The fourth meets room 3 where the third
		// met 5 (more than its 2 nodes either way: the same instances,
		// replayed, its options estimated); the fifth's room of 1 does
		// not hold its two nodes there, and the cycle runs.
		{name: "room running out", maxR3: 7, replayed: 1, options: 0},
		// Which pods a reservation serves depends on the pods: the
		// options are estimated for every gang, the runs still replayed.
		{name: "a reservation caps a group", maxR3: 100, capped: true, replayed: 2, options: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxR3, capped = tc.maxR3, tc.capped
			want, plain := planned(t, estimator.Options{Shortcuts: shortcut.Plain()})
			if r, o := plain.GangsReplayed(); r != 0 || o != 0 {
				t.Errorf("without shortcuts %d gangs replayed, %d with options reused", r, o)
			}
			got, p := planned(t, estimator.Options{})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plans with the replays (-plain +replayed):\n%s", diff)
			}
			if r, o := p.GangsReplayed(); r != tc.replayed || o != tc.options {
				t.Errorf("%d gangs replayed, %d with options reused; want %d, %d\n%s", r, o, tc.replayed, tc.options, strings.Join(got, "\n"))
			}
			check := &shortcut.Checker{Verify: true}
			got, p = planned(t, estimator.Options{Check: check})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plans in verify mode (-plain +verified):\n%s", diff)
			}
			if r, o := p.GangsReplayed(); check.Err() != nil || r != 0 || o != 0 {
				t.Errorf("verify mode: %v, %d replayed, %d with options reused; want no mismatch, the runs made", check.Err(), r, o)
			}
		})
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// capR3 puts g-b2-r3 on a reservation with room for 100 nodes.
type capR3 struct{}

func (capR3) Room(g *nodegroups.Info, pods []*corev1.Pod) (int, []*corev1.Pod, string, string) {
	if g.Id == "g-b2-r3" {
		return 100, pods, "", ""
	}
	return -1, pods, "", ""
}
func (capR3) Describe(*nodegroups.Info, int, []*corev1.Pod) (string, int, float64) { return "", 0, 0 }
func (capR3) Take(*nodegroups.Info, int, []*corev1.Pod)                            {}
func (capR3) Mark() func()                                                         { return func() {} }
