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
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The scheduler's pod group cycle (Options.GangCycle) and the planner's own
// domain loop choose the same rack on simple cases, and plan it alike.
// With room on rack-a's existing node both keep the gang there: the loop
// because it needs no new node, the cycle because its placement scores
// higher (PodGroupPodsCount ties at 100; NodeResourcesFit's MostAllocated
// gives the full existing node 50, the half-used 8-CPU instance 26). With
// room for one member only, rack-a cannot reach minCount (no group there)
// and both turn to rack-b's group.
func TestGangCycleChoosesTheLoopsDomain(t *testing.T) {
	const rack = "example.com/rack"
	tests := []struct {
		name     string
		existing string // CPUs of rack-a's existing node
		groupCPU string // CPUs of rack-b's group template
		domain   string
		ups      []string
		onA1     int
	}{
		{name: "existing room in rack-a", existing: "4", groupCPU: "8", domain: "rack-a", onA1: 2},
		{name: "only rack-b's new nodes host it", existing: "2", groupCPU: "4", domain: "rack-b", ups: []string{"b: [train-0 train-1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			type outcome struct {
				Domain string
				Ups    []string
				OnA1   int
			}
			var got []outcome
			for _, cycle := range []bool{false, true} {
				o := planRackGang(t, cycle, rack, tc.existing, tc.groupCPU, "rack-b")
				if len(o.ScaleUps) == 0 && !o.FitsExisting {
					t.Fatalf("cycle %v: gang not planned: %s", cycle, o.Message)
				}
				onA1 := 0
				for _, node := range o.Existing {
					if node == "a1" {
						onA1++
					}
				}
				got = append(got, outcome{o.Domain, nodesOf(o.ScaleUps), onA1})
			}
			want := outcome{tc.domain, tc.ups, tc.onA1}
			if diff := cmp.Diff(want, got[0]); diff != "" {
				t.Errorf("planner's loop (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(got[0], got[1]); diff != "" {
				t.Errorf("pod group cycle differs from the loop (-loop +cycle):\n%s", diff)
			}
		})
	}
}

// planRackGang plans a two-member gang (2 CPUs each, minCount 2, one rack)
// with rack-a's existing node a1 and node group b on groupRack ("": none).
func planRackGang(t *testing.T, cycle bool, rack, existingCPU, groupCPU, groupRack string) plan.GangOutcome {
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
	e.opts.GangCycle = cycle
	snap := runner.Snapshot()
	if err := snap.AddNode(builder.Node("a1").CPU(existingCPU).Label(rack, "rack-a").Obj()); err != nil {
		t.Fatal(err)
	}
	if err := snap.SetPodGroup(builder.PodGroup("ns", "train").MinCount(2).TopologyKey(rack).Obj()); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range 2 {
		pods = append(pods, builder.Pod("ns", fmt.Sprintf("train-%d", i)).CPU("2").Memory("1Gi").PodGroup("train").Obj())
	}
	b := group("b", groupCPU, 10, 0)
	if groupRack != "" {
		b.Template.Node.Labels[rack] = groupRack
	}
	g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 2, TopologyKey: rack, Pending: pods}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, []string{"a1"}, []*nodegroups.Info{b}, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// When no rack can host the gang the cycle says so in the scheduler's
// words: GangScheduling's verdict on the only placement, rack-a (the
// group's template has no rack label, so its instances join none).
func TestGangCycleReportsTheSchedulersVerdict(t *testing.T) {
	const rack = "example.com/rack"
	o := planRackGang(t, true, rack, "2", "4", "")
	if len(o.ScaleUps) != 0 || o.FitsExisting {
		t.Fatalf("planned %v, want nothing", nodesOf(o.ScaleUps))
	}
	want := "the scheduler's pod group cycle finds no placement: 0/1 placements are available, first placement status: minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
	if o.Message != want {
		t.Errorf("message %q, want %q", o.Message, want)
	}
}
