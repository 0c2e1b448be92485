package plan_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
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
	snap := runner.Snapshot()
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
	groups := func() []*nodegroups.Info {
		return []*nodegroups.Info{blockRackGroup("g-b1-r1", "4", "b1", "r1", 100), blockRackGroup("g-b1-r2", "4", "b1", "r2", 100),
			blockRackGroup("g-b2-r3", "4", "b2", "r3", 100), blockRackGroup("g-b2-r4", "4", "b2", "r4", 100)}
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
	want, plain := planned(t, estimator.Options{Shortcuts: shortcut.Plain()})
	if plain.GangsReplayed() != 0 {
		t.Errorf("without shortcuts %d gangs replayed", plain.GangsReplayed())
	}
	got, p := planned(t, estimator.Options{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plans with the replays (-plain +replayed):\n%s", diff)
	}
	if p.GangsReplayed() != 2 {
		t.Errorf("%d gangs replayed, want 2 (the last two)", p.GangsReplayed())
	}
	check := &shortcut.Checker{Verify: true}
	got, p = planned(t, estimator.Options{Check: check})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plans in verify mode (-plain +verified):\n%s", diff)
	}
	if err := check.Err(); err != nil || p.GangsReplayed() != 0 {
		t.Errorf("verify mode: %v, %d replayed; want no mismatch, the runs made", err, p.GangsReplayed())
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}
