package plan_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/reserved"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
)

// reservingProvider is the fake provider with reservations.
type reservingProvider struct {
	*fakeprovider.Provider
	res []cloudprovider.ReservedCapacity
}

func (p *reservingProvider) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	return p.res, nil
}

func reservedGroup(id string, target int) *nodegroups.Info {
	g := group(id, "4", 10, target)
	g.Template.Node.Labels[reservations.LabelCapacityType] = reservations.CapacityReserved
	return g
}

// unitsOf makes g's nodes come n at a time.
func unitsOf(g *nodegroups.Info, n int) *nodegroups.Info {
	g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationUnitSize: strconv.Itoa(n)}
	return g
}

func withRuntime(pods []*corev1.Pod, d string) []*corev1.Pod {
	for _, p := range pods {
		p.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: d}
	}
	return pods
}

// Each pod of 3 CPUs needs a 4-CPU node of its own. "ondemand" sorts
// first, so without the reserved expander and the cap it would win all.
func TestPlanReservedFirstAndCapped(t *testing.T) {
	block := func(start, end time.Time) cloudprovider.ReservedCapacity {
		return cloudprovider.ReservedCapacity{ID: "block", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"reserved"}, Count: 2, Start: start, End: end}
	}
	tests := []struct {
		name   string
		res    []cloudprovider.ReservedCapacity
		groups func() []*nodegroups.Info
		pods   []*corev1.Pod
		want   []string
	}{{
		name: "two reserved, the rest on-demand",
		res:  []cloudprovider.ReservedCapacity{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved"}, Count: 2}},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0)}
		},
		pods: cpuPods("job", "3", 3),
		want: []string{"reserved+2: job-0 job-1", "ondemand+1: job-2"},
	}, {
		name: "nodes requested earlier take the count",
		res:  []cloudprovider.ReservedCapacity{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved"}, Count: 2}},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 1)}
		},
		pods: cpuPods("job", "3", 3),
		want: []string{"reserved+1: job-0", "ondemand+2: job-1 job-2"},
	}, {
		name: "two groups share one counter",
		res:  []cloudprovider.ReservedCapacity{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved-a", "reserved-b"}, Count: 2}},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved-a", 0), reservedGroup("reserved-b", 0)}
		},
		pods: cpuPods("job", "3", 3),
		want: []string{"reserved-a+2: job-0 job-1", "ondemand+1: job-2"},
	}, {
		name: "a block not started is not used",
		res:  []cloudprovider.ReservedCapacity{block(now.Add(10*time.Minute), now.Add(2*time.Hour))},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0)}
		},
		pods: cpuPods("job", "3", 1),
		want: []string{"ondemand+1: job-0"},
	}, {
		name: "a block ending within the margin serves no 2h pod",
		res:  []cloudprovider.ReservedCapacity{block(now.Add(-time.Hour), now.Add(5*time.Minute))},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0)}
		},
		pods: withRuntime(cpuPods("job", "3", 1), "2h"),
		want: []string{"ondemand+1: job-0"},
	}, {
		name: "a block ending within the margin serves a 2m pod",
		res:  []cloudprovider.ReservedCapacity{block(now.Add(-time.Hour), now.Add(5*time.Minute))},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0)}
		},
		pods: withRuntime(cpuPods("job", "3", 1), "2m"),
		want: []string{"reserved+1: job-0"},
	}, {
		name: "short pods get the ending block, long ones go elsewhere",
		res:  []cloudprovider.ReservedCapacity{block(now.Add(-time.Hour), now.Add(5*time.Minute))},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), reservedGroup("reserved", 0)}
		},
		pods: append(withRuntime(cpuPods("long", "3", 1), "2h"), withRuntime(cpuPods("short", "3", 1), "2m")...),
		want: []string{"reserved+1: short-0", "ondemand+1: long-0"},
	}, {
		name: "a reserved group of units launches whole units of its reservation",
		res:  []cloudprovider.ReservedCapacity{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved"}, Count: 3}},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), unitsOf(reservedGroup("reserved", 0), 2)}
		},
		pods: cpuPods("job", "3", 3),
		want: []string{"reserved+2: job-0 job-1", "ondemand+1: job-2"},
	}, {
		name: "a reservation left with less than a unit",
		res:  []cloudprovider.ReservedCapacity{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved"}, Count: 3}},
		groups: func() []*nodegroups.Info {
			return []*nodegroups.Info{group("ondemand", "4", 10, 0), unitsOf(reservedGroup("reserved", 2), 2)}
		},
		pods: cpuPods("job", "3", 1),
		want: []string{"ondemand+1: job-0"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			groups := tc.groups()
			stage := reservations.New(reservations.Options{EndMargin: 30 * time.Minute, LaunchTTL: time.Minute},
				&reservingProvider{Provider: fakeprovider.New(), res: tc.res}, nil, nil)
			count := stage.Count(e.ctx, groups, nil, now)
			chain := expander.Chain{reserved.New(), leastwaste.New()}
			p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), chain, limits.New(e.conf, nil), e.backoff, nil).WithCapacity(count)
			out, err := p.Plan(e.ctx, tc.pods, groups, limits.Usage{}, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, scaleUps(out)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			for _, s := range count.Book.Slots() {
				if s.InUse > s.Count {
					t.Errorf("reservation %s: %d in use of %d", s.ID, s.InUse, s.Count)
				}
			}
		})
	}
}

// A gang filled from several groups: two reserved-only groups share one
// 2-node reservation, so together they give it 2 nodes, never 3.
func TestPlanGangSharesTheReservationCounter(t *testing.T) {
	e := newEnv(t)
	ondemand := group("ondemand", "4", 1, 0)
	groups := []*nodegroups.Info{ondemand, reservedGroup("reserved-a", 0), reservedGroup("reserved-b", 0)}
	stage := reservations.New(reservations.Options{EndMargin: 30 * time.Minute, LaunchTTL: time.Minute},
		&reservingProvider{Provider: fakeprovider.New(), res: []cloudprovider.ReservedCapacity{
			{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"reserved-a", "reserved-b"}, Count: 2}}}, nil, nil)
	count := stage.Count(e.ctx, groups, nil, now)
	chain := expander.Chain{reserved.New(), leastwaste.New()}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), chain, limits.New(e.conf, nil), e.backoff, nil).WithCapacity(count)
	g := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 3, Pending: cpuPods("train", "3", 3)}
	usage := limits.Usage{}
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{g}, nil, groups, usage, now)
	if err != nil {
		t.Fatal(err)
	}
	total, onReserved := 0, 0
	for _, up := range out[0].ScaleUps {
		total += up.Delta
		if up.Group.Id != "ondemand" {
			onReserved += up.Delta
		}
	}
	if total != 3 || onReserved != 2 {
		t.Errorf("gang got %d nodes, %d on the reservation; want 3 and 2 (%v)", total, onReserved, out[0].Message)
	}
	if s := count.Book.Slots()[0]; s.InUse != 2 {
		t.Errorf("reservation in use %d after the plan, want 2", s.InUse)
	}
}

// namingGroup is a fake group that names its CapacityReservation object,
// as a labelled Cluster API MachineDeployment does.
type namingGroup struct {
	cloudprovider.NodeGroup
	reservation string
}

func (g namingGroup) CapacityReservation() string { return g.reservation }

type objects []*unstructured.Unstructured

func (o objects) List() []*unstructured.Unstructured { return o }

// A CapacityReservation object that names no group serves the group that
// names it: 2 of 3 one-node pods land on it, the third on demand.
func TestPlanGroupNamingItsReservationObject(t *testing.T) {
	e := newEnv(t)
	res := group("reserved", "4", 10, 0)
	res.Group = namingGroup{NodeGroup: res.Group, reservation: "h100"}
	groups := []*nodegroups.Info{group("ondemand", "4", 10, 0), res}
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.dra-autoscaler.io/v1alpha1", "kind": "CapacityReservation",
		"metadata": map[string]any{"name": "h100"}, "spec": map[string]any{"count": int64(2)},
	}}
	stage := reservations.New(reservations.Options{EndMargin: 30 * time.Minute, LaunchTTL: time.Minute}, fakeprovider.New(), objects{cr}, nil)
	count := stage.Count(e.ctx, groups, nil, now)
	if len(count.Rejected()) != 0 {
		t.Fatalf("rejected: %v", count.Rejected()[0].Err)
	}
	chain := expander.Chain{reserved.New(), leastwaste.New()}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), chain, limits.New(e.conf, nil), e.backoff, nil).WithCapacity(count)
	out, err := p.Plan(e.ctx, cpuPods("job", "3", 3), groups, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"reserved+2: job-0 job-1", "ondemand+1: job-2"}, scaleUps(out)); diff != "" {
		t.Errorf("scale-ups (-want +got):\n%s", diff)
	}
	if s := count.Book.Slots()[0]; s.InUse != 2 || !slices.Equal(count.Book.ServedGroups(s), []string{"reserved"}) {
		t.Errorf("reservation %s: %d in use, serves %v; want 2 and [reserved]", s.ID, s.InUse, count.Book.ServedGroups(s))
	}
}
