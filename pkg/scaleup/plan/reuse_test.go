package plan_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/mostpods"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/reserved"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const poolLabel = "pool"

// pooled is a group of cpu-CPU nodes labelled pool=pool (and zone, if set).
func pooled(id, pool, zone, cpu string, max int) *nodegroups.Info {
	g := group(id, cpu, max, 0)
	g.Template.Node.Labels[poolLabel] = pool
	if zone != "" {
		g.Template.Node.Labels[corev1.LabelTopologyZone] = zone
	}
	return g
}

// podsFor are n pods of cpu CPUs for pool, labelled app=prefix.
func podsFor(prefix, pool, cpu string, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = builder.Pod("ns", fmt.Sprintf("%s-%d", prefix, i)).CPU(cpu).Memory("1Gi").Label("app", prefix).
			NodeSelector(poolLabel, pool).OwnedBy("apps/v1", "ReplicaSet", prefix).Obj()
	}
	return out
}

// repelling gives each pod required anti-affinity to app=app pods in its zone.
func repelling(pods []*corev1.Pod, app string) []*corev1.Pod {
	for _, p := range pods {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: corev1.LabelTopologyZone}}}}
	}
	return pods
}

// spread gives each pod a zone spread constraint over its own app label.
func spread(pods []*corev1.Pod) []*corev1.Pod {
	for _, p := range pods {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}}
	}
	return pods
}

func cat(lists ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// carryCase is a planning scenario of several rounds. Its parts are made
// anew for each plan: planning keeps nodes in the snapshot and books
// reservations.
type carryCase struct {
	name   string
	pods   func() []*corev1.Pod
	groups func() []*nodegroups.Info
	// setup adjusts the environment and the planner (nil: as newEnv);
	// it may plan gangs first.
	setup func(t *testing.T, e *env, groups []*nodegroups.Info) *plan.Planner
	// want, when set, is the plan's scale-ups (with carrying or not).
	want []string
	// carries: the scenario must carry at least one estimate.
	carries bool
}

func carryCases() []carryCase {
	gpuPods := func(prefix, pool string, n int) []*corev1.Pod {
		out := make([]*corev1.Pod, n)
		for i := range out {
			out[i] = builder.Pod("ns", fmt.Sprintf("%s-%d", prefix, i)).CPU("1").NodeSelector(poolLabel, pool).
				ClaimFromTemplate("gpu", "one-gpu").OwnedBy("apps/v1", "ReplicaSet", prefix).Obj()
		}
		return out
	}
	return []carryCase{{
		name: "pools of different hardware, one pod fits nowhere",
		pods: func() []*corev1.Pod {
			return cat(podsFor("a", "a", "3", 4), podsFor("b", "b", "6", 3), podsFor("c", "c", "2", 5), podsFor("huge", "a", "64", 1))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a-1", "a", "", "4", 10), pooled("a-2", "a", "", "4", 10), pooled("b-1", "b", "", "8", 10),
				pooled("b-2", "b", "", "16", 10), pooled("c-1", "c", "", "4", 10), pooled("c-2", "c", "", "4", 10)}
		},
		carries: true,
	}, {
		name: "devices from templates, as at L2",
		pods: func() []*corev1.Pod { return cat(gpuPods("x", "x", 5), gpuPods("y", "y", 3), gpuPods("z", "z", 7)) },
		groups: func() []*nodegroups.Info {
			var out []*nodegroups.Info
			for _, pool := range []string{"x", "y", "z"} {
				for i := range 2 {
					g := pooled(fmt.Sprintf("%s-%d", pool, i), pool, "", "16", 10)
					sl := builder.ResourceSlice("gpus", template.PlaceholderNodeName, gpuDriver, template.PlaceholderNodeName)
					for d := range 2 + i {
						sl.Devices(builder.Device(fmt.Sprintf("gpu-%d", d)))
					}
					g.Template.ResourceSlices = []*resourceapi.ResourceSlice{sl.Obj()}
					out = append(out, g)
				}
			}
			return out
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			snap := e.runner.Snapshot()
			if err := snap.SetDeviceClass(builder.DeviceClass("gpu").Driver(gpuDriver).Obj()); err != nil {
				t.Fatal(err)
			}
			if err := snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()); err != nil {
				t.Fatal(err)
			}
			return nil
		},
		carries: true,
	}, {
		// Round 1 takes the repelling pods into z1 (most pods); web-z1,
		// estimated before them and cheapest, then rejects web.
		name: "anti-affinity of the kept pods between rounds",
		pods: func() []*corev1.Pod {
			return cat(repelling(podsFor("anti", "anti", "3", 3), "web"), podsFor("web", "web", "2", 2))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("anti", "anti", "z1", "4", 10), pooled("web-z1", "web", "z1", "4", 10), pooled("web-z2", "web", "z2", "8", 10)}
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			e.chain = expander.Chain{mostpods.New(), leastwaste.New()}
			return nil
		},
		want: []string{"anti+3: anti-0 anti-1 anti-2", "web-z2+1: web-0 web-1"},
	}, {
		name: "topology spread left for later rounds",
		pods: func() []*corev1.Pod {
			return cat(podsFor("a", "a", "3", 4), spread(podsFor("web", "web", "2", 4)), podsFor("c", "c", "2", 2))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a", "a", "z1", "4", 10), pooled("web-z1", "web", "z1", "4", 10), pooled("web-z2", "web", "z2", "4", 10),
				pooled("c", "c", "z2", "4", 10)}
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			e.chain = expander.Chain{mostpods.New(), leastwaste.New()}
			return nil
		},
	}, {
		// a (4 nodes, 16 cores) goes first; the 32-core total leaves b
		// room for 2 of the 3 nodes its first estimate used.
		name: "cluster limit binds in round 2",
		pods: func() []*corev1.Pod { return cat(podsFor("a", "a", "3", 4), podsFor("b", "b", "6", 3)) },
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a", "a", "", "4", 10), pooled("b", "b", "", "8", 10)}
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			e.chain = expander.Chain{mostpods.New(), leastwaste.New()}
			e.conf.CoresTotal.Max = 32
			return nil
		},
		want: []string{"a+4: a-0 a-1 a-2 a-3", "b+2: b-0 b-1"},
	}, {
		name: "per-scale-up cap binds alike in every round",
		pods: func() []*corev1.Pod {
			return cat(podsFor("a", "a", "3", 3), podsFor("b", "b", "6", 4), podsFor("c", "c", "3", 1))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a", "a", "", "4", 10), pooled("b", "b", "", "8", 10), pooled("c", "c", "", "4", 10)}
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			e.opts.MaxNodesPerScaleUp = 2
			return nil
		},
		carries: true,
	}, {
		name: "reservations restrict and are booked between rounds",
		pods: func() []*corev1.Pod {
			return cat(withRuntime(cpuPods("long", "3", 2), "2h"), withRuntime(cpuPods("short", "3", 2), "2m"), podsFor("big", "big", "6", 2))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0), reservedGroup("reserved-b", 0),
				pooled("big", "big", "", "8", 10)}
		},
		setup: func(t *testing.T, e *env, groups []*nodegroups.Info) *plan.Planner {
			res := []cloudprovider.ReservedCapacity{
				{ID: "block", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"reserved"}, Count: 1, Start: now.Add(-time.Hour), End: now.Add(5 * time.Minute)},
				{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved-b"}, Count: 1},
			}
			stage := reservations.New(reservations.Options{EndMargin: 30 * time.Minute, LaunchTTL: time.Minute},
				&reservingProvider{Provider: fakeprovider.New(), res: res}, nil, nil)
			count := stage.Count(e.ctx, groups, nil, now)
			e.chain = expander.Chain{reserved.New(), leastwaste.New()}
			return plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil).WithCapacity(count)
		},
	}, {
		name: "balancing over similar groups, then other hardware",
		pods: func() []*corev1.Pod { return cat(cpuPods("web", "3", 4), podsFor("big", "big", "12", 2)) },
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{zonal("za", "z1", 10, 0), zonal("zb", "z2", 10, 0), pooled("big", "big", "", "16", 10)}
		},
		setup: func(t *testing.T, e *env, _ []*nodegroups.Info) *plan.Planner {
			e.opts.Balance = balance.New(nil, []string{"group"})
			return nil
		},
	}, {
		name: "gang planned first, then pools",
		pods: func() []*corev1.Pod { return cat(podsFor("a", "a", "3", 3), podsFor("b", "b", "3", 2)) },
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a", "a", "", "4", 10), pooled("b", "b", "", "4", 10), pooled("train", "train", "", "4", 10)}
		},
		setup: func(t *testing.T, e *env, groups []*nodegroups.Info) *plan.Planner {
			p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
			g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 3, Pending: podsFor("train", "train", "3", 3)}
			out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, nil, groups, limits.Usage{}, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(out[0].ScaleUps) == 0 {
				t.Fatalf("gang not planned: %s", out[0].Message)
			}
			return p
		},
		carries: true,
	}}
}

// rendered is a plan in comparable form.
type rendered struct {
	ScaleUps  []string
	NotHelped []string
	Reasons   map[string][]string
}

func render(p *plan.Plan) rendered {
	r := rendered{ScaleUps: scaleUps(p), Reasons: map[string][]string{}}
	names := map[string]string{}
	for _, pod := range p.NotHelped {
		r.NotHelped = append(r.NotHelped, pod.Name)
		names[string(pod.UID)] = pod.Name
	}
	sort.Strings(r.NotHelped)
	for uid, rs := range p.Reasons {
		for _, gr := range rs {
			r.Reasons[names[string(uid)]] = append(r.Reasons[names[string(uid)]], fmt.Sprintf("%s/%s/%s/%s", gr.Group, gr.Reason, gr.Message, gr.Constraint))
		}
	}
	return r
}

// planCase plans tc on a fresh environment, carrying or not, and returns
// the plan with the estimates run and carried.
func planCase(t *testing.T, tc carryCase, carry bool) (rendered, int, int) {
	t.Helper()
	e := newEnv(t)
	groups := tc.groups()
	var p *plan.Planner
	if tc.setup != nil {
		p = tc.setup(t, e, groups)
	}
	if p == nil {
		p = plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	}
	if !carry {
		p = p.WithoutCarry()
	}
	out, estimated, carried, err := p.PlanCounting(e.ctx, tc.pods(), groups, limits.Usage{}, now)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return render(out), estimated, carried
}

// Carrying estimates from round to round must not change the plan: the
// scale-ups, the pods not helped and every reason are the ones full
// re-estimation gives.
func TestCarryIsExact(t *testing.T) {
	for _, tc := range carryCases() {
		t.Run(tc.name, func(t *testing.T) {
			with, estimated, carried := planCase(t, tc, true)
			without, all, none := planCase(t, tc, false)
			if diff := cmp.Diff(without, with); diff != "" {
				t.Errorf("plan with carrying differs (-without +with):\n%s", diff)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, with.ScaleUps); diff != "" {
					t.Errorf("scale-ups (-want +got):\n%s", diff)
				}
			}
			if none != 0 {
				t.Errorf("without carrying %d estimates were carried", none)
			}
			if estimated+carried != all {
				t.Errorf("%d estimated + %d carried, want the %d candidates planning without carrying estimates", estimated, carried, all)
			}
			if tc.carries && carried == 0 {
				t.Errorf("nothing carried (%d estimated)", estimated)
			}
			t.Logf("%d estimated, %d carried; %d without carrying", estimated, carried, all)
		})
	}
}

// Three pools of two groups: after the first round nothing is estimated
// again. The chosen pool's other group lost every pod it placed, and is
// carried with only the pods it had no room for (estimator.Carry); every
// other group is carried whole.
func TestCarryEstimatesOnlyWhatChanged(t *testing.T) {
	tc := carryCase{
		pods: func() []*corev1.Pod {
			return cat(podsFor("a", "a", "3", 4), podsFor("b", "b", "3", 3), podsFor("c", "c", "3", 2))
		},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{pooled("a-1", "a", "", "4", 10), pooled("a-2", "a", "", "4", 10), pooled("b-1", "b", "", "4", 10),
				pooled("b-2", "b", "", "4", 10), pooled("c-1", "c", "", "4", 10), pooled("c-2", "c", "", "4", 10)}
		},
	}
	_, estimated, carried := planCase(t, tc, true)
	_, all, _ := planCase(t, tc, false)
	// Rounds take a (6 candidates), b (5), c (4); then none is left.
	// Carrying: 6 estimated; then 5 carried; then 4.
	if estimated != 6 || carried != 9 || all != 15 {
		t.Errorf("%d estimated, %d carried, %d without carrying; want 6, 9, 15", estimated, carried, all)
	}
}

// The keep of each round's choice copies what the option's estimate
// learnt, carried options' included (rounds two and three choose
// estimates carried from round one): no framework call, and the plan a
// planner without any memo makes.
func TestKeepsCopyTheOptions(t *testing.T) {
	pods := func() []*corev1.Pod {
		return cat(podsFor("a", "a", "3", 4), podsFor("b", "b", "3", 3), podsFor("c", "c", "3", 2))
	}
	groups := func() []*nodegroups.Info {
		return []*nodegroups.Info{pooled("a-1", "a", "", "4", 10), pooled("a-2", "a", "", "4", 10), pooled("b-1", "b", "", "4", 10),
			pooled("b-2", "b", "", "4", 10), pooled("c-1", "c", "", "4", 10), pooled("c-2", "c", "", "4", 10)}
	}
	var plans [2]rendered
	var calls [2]int
	for i, memo := range []bool{true, false} {
		e := newEnv(t)
		p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{DisableMemo: !memo}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
		out, n, err := p.KeepCalls(e.ctx, pods(), groups(), limits.Usage{}, now)
		if err != nil {
			t.Fatalf("memo=%v: %v", memo, err)
		}
		if len(out.ScaleUps) != 3 {
			t.Fatalf("memo=%v: %d scale-ups, want one per pool", memo, len(out.ScaleUps))
		}
		plans[i], calls[i] = render(out), n
	}
	if diff := cmp.Diff(plans[1], plans[0]); diff != "" {
		t.Errorf("plan with seeded keeps differs (-without memo +with):\n%s", diff)
	}
	if calls[0] != 0 || calls[1] == 0 {
		t.Errorf("keeps made %d framework calls with the memo, %d without; want 0 and some", calls[0], calls[1])
	}
}
