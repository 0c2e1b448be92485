package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// zonal is a group of 4-CPU nodes in zone.
func zonal(id, zone string, max, target int) *nodegroups.Info {
	g := group(id, "4", max, target)
	g.Template.Node.Labels[corev1.LabelTopologyZone] = zone
	return g
}

func TestPlanBalancesSimilarGroups(t *testing.T) {
	// The groups' own name label ("group") differs; the provider's
	// wiring ignores it, as the tests here do.
	similar := balance.New(nil, []string{"group"})
	tests := []struct {
		name    string
		balance *balance.Similarity
		groups  []*nodegroups.Info
		pods    []*corev1.Pod
		want    []string
	}{
		{name: "without balancing one group takes all", groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 0)},
			pods: cpuPods("web", "3", 4), want: []string{"a+4: web-0 web-1 web-2 web-3"}},
		{name: "two zones 2+2", balance: similar, groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 0)},
			pods: cpuPods("web", "3", 4), want: []string{"a+2: web-0 web-1", "b+2: web-2 web-3"}},
		{name: "smallest first", balance: similar, groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 3), zonal("c", "z3", 10, 1)},
			pods: cpuPods("web", "3", 4), want: []string{"a+3: web-0 web-1 web-2", "c+1: web-3"}},
		{name: "max respected", balance: similar, groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 1, 0)},
			pods: cpuPods("web", "3", 4), want: []string{"a+3: web-0 web-1 web-2", "b+1: web-3"}},
		{name: "zone compared with --balancing-label", balance: balance.New([]string{corev1.LabelTopologyZone}, nil),
			groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 0)},
			pods:   cpuPods("web", "3", 4), want: []string{"a+4: web-0 web-1 web-2 web-3"}},
		{name: "other shape is not similar", balance: similar, groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), group("five", "5", 10, 0)},
			pods: cpuPods("web", "3", 4), want: []string{"a+4: web-0 web-1 web-2 web-3"}},
		{name: "pods pinned to one zone stay there", balance: similar, groups: []*nodegroups.Info{zonal("a", "z1", 10, 0), zonal("b", "z2", 10, 0)},
			pods: []*corev1.Pod{
				builder.Pod("ns", "pinned-0").CPU("3").NodeSelector(corev1.LabelTopologyZone, "z2").OwnedBy("apps/v1", "ReplicaSet", "pinned").Obj(),
				builder.Pod("ns", "pinned-1").CPU("3").NodeSelector(corev1.LabelTopologyZone, "z2").OwnedBy("apps/v1", "ReplicaSet", "pinned").Obj(),
			},
			want: []string{"b+2: pinned-0 pinned-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.opts.Balance = tc.balance
			p := e.plan(t, tc.pods, tc.groups, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			if len(p.NotHelped) != 0 {
				t.Errorf("not helped: %v", p.NotHelped)
			}
		})
	}
}
