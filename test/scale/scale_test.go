package scale

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
)

func TestBusy(t *testing.T) {
	tests := []struct {
		name                 string
		layout               Layout
		wantFit, wantPlanned int
	}{
		// 50 pods, one per shape: 10 fit; the plain pools take 16, 16
		// and 15 GPUs (2 nodes each), the NIC pools 7, 6, 6 GPUs and the
		// partitionable ones 7, 6, 6 halves (a node each).
		{"one pod per shape", Layout{Nodes: 20, Pending: 50, Groups: 19, ExistingGroups: 10, Pools: 9, Shapes: 50, FitEvery: 5, Used: 4}, 10, 12},
		// 200 pods a shape: 400 + 400 + 375 + 175 + 150 + 150 + 88 + 75 + 75.
		{"L2", L2, 2000, 1888},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := Busy(tc.layout)
			var nodes, claims, pending int
			for _, o := range sc.Objects {
				switch o := o.(type) {
				case *corev1.Node:
					nodes++
				case *resourceapi.ResourceClaim:
					if o.Status.Allocation == nil {
						t.Errorf("claim %s not allocated", o.Name)
					}
					claims++
				case *corev1.Pod:
					if o.Spec.NodeName == "" {
						pending++
					}
				}
			}
			l := tc.layout
			if nodes != l.Nodes || claims != l.Nodes*l.Used || pending != l.Pending {
				t.Errorf("%d nodes, %d claims, %d pending pods; want %d, %d, %d", nodes, claims, pending, l.Nodes, l.Nodes*l.Used, l.Pending)
			}
			if len(sc.Config.NodeGroups) != l.Groups {
				t.Errorf("%d node groups, want %d", len(sc.Config.NodeGroups), l.Groups)
			}
			if sc.WantFit != tc.wantFit || sc.WantPlanned != tc.wantPlanned {
				t.Errorf("want %d fit and %d planned, layout says %d and %d", tc.wantFit, tc.wantPlanned, sc.WantFit, sc.WantPlanned)
			}
		})
	}
}

func TestBusyGangs(t *testing.T) {
	l := GangLayout{Layout: Layout{Nodes: 20, Pending: 50, Groups: 19, ExistingGroups: 10, Pools: 9, Shapes: 50, FitEvery: 5, Used: 4},
		Gangs: 3, Blocks: 2, Racks: 2}
	sc := BusyGangs(l)
	base := Busy(l.Layout)
	var composites, groups, members int
	for _, o := range sc.Objects {
		switch o := o.(type) {
		case *schedulingv1alpha3.CompositePodGroup:
			composites++
		case *schedulingv1beta1.PodGroup:
			groups++
			if o.Spec.ParentCompositePodGroupName == nil {
				t.Errorf("PodGroup %s has no parent", o.Name)
			}
		case *corev1.Pod:
			if o.Spec.SchedulingGroup != nil {
				members++
			}
		}
	}
	if composites != 3 || groups != 6 || members != 24 {
		t.Errorf("%d composites, %d PodGroups, %d members; want 3, 6, 24", composites, groups, members)
	}
	if got := len(sc.Config.NodeGroups) - len(base.Config.NodeGroups); got != 4 {
		t.Errorf("%d gang groups, want 4", got)
	}
	if sc.WantFit != base.WantFit || sc.WantPlanned != base.WantPlanned+24 {
		t.Errorf("want %d fit and %d planned, base %d and %d", sc.WantFit, sc.WantPlanned, base.WantFit, base.WantPlanned)
	}
}
