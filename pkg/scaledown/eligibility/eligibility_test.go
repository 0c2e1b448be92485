package eligibility

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/utilization"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestCheck(t *testing.T) {
	th := Thresholds{Utilization: 0.5, GPU: 0.3}
	annotated := func(v string) *corev1.Node {
		n := builder.Node("n").Obj()
		n.Annotations = map[string]string{ScaleDownDisabledAnnotation: v}
		return n
	}
	low := utilization.NodeUtilization{Utilization: 0.2, Resource: "cpu"}
	tests := []struct {
		name     string
		node     *corev1.Node
		util     utilization.NodeUtilization
		eligible bool
		reason   string
		warning  bool
		// unreadyDisabled is --scale-down-unready-enabled=false.
		unreadyDisabled bool
	}{
		{name: "underutilized", node: builder.Node("n").Obj(), util: low, eligible: true},
		{name: "at the threshold", node: builder.Node("n").Obj(), util: utilization.NodeUtilization{Utilization: 0.5}, reason: NotUnderutilized},
		{name: "accelerator node uses the GPU threshold", node: builder.Node("n").Obj(), util: utilization.NodeUtilization{Utilization: 0.4, HasDevices: true}, reason: NotUnderutilized},
		{name: "accelerator node under the GPU threshold", node: builder.Node("n").Obj(), util: utilization.NodeUtilization{Utilization: 0.1, HasDevices: true}, eligible: true},
		{name: "disabled", node: annotated("true"), util: low, reason: ScaleDownDisabled},
		{name: "explicitly enabled", node: annotated("false"), util: low, eligible: true},
		{name: "malformed annotation keeps the node and warns", node: annotated("perhaps"), util: low, reason: ScaleDownDisabled, warning: true},
		{name: "unready, allowed", node: builder.Node("n").NotReady().Obj(), util: low, eligible: true},
		{name: "unready, not allowed", node: builder.Node("n").NotReady().Obj(), util: low, unreadyDisabled: true, reason: ScaleDownUnreadyDisabled},
		{name: "ready when unready nodes are not allowed", node: builder.Node("n").Obj(), util: low, unreadyDisabled: true, eligible: true},
		{name: "being deleted by us", node: builder.Node("n").Taint(ToBeDeletedTaint, "1", corev1.TaintEffectNoSchedule).Obj(), util: low, reason: CurrentlyBeingDeleted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(tc.node, tc.util, th, !tc.unreadyDisabled)
			if v.Eligible != tc.eligible || v.Reason != tc.reason || (v.Warning != "") != tc.warning {
				t.Fatalf("got %+v, want eligible %v reason %q warning %v", v, tc.eligible, tc.reason, tc.warning)
			}
		})
	}
}
