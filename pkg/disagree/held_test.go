package disagree

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Pods held on a registered node by a nomination count as placed there
// for the disagreement detector, as pods the fit-existing stage placed do.
func TestWithHeld(t *testing.T) {
	unschedulable := func(b *builder.PodBuilder) *corev1.Pod {
		p := b.Obj()
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return p
	}
	fit := unschedulable(builder.Pod("ns", "fit"))
	held := unschedulable(builder.Pod("ns", "held").Nominated("n1"))
	tests := []struct {
		name string
		pods []*corev1.Pod
		want map[string]string
	}{
		{"fits only", []*corev1.Pod{fit}, map[string]string{"fit": "n2"}},
		{"held on a registered node", []*corev1.Pod{fit, held}, map[string]string{"fit": "n2", "held": "n1"}},
		{"nominated for a node not registered", []*corev1.Pod{fit, unschedulable(builder.Pod("ns", "away").Nominated("gone"))}, map[string]string{"fit": "n2"}},
		{"nominated, not found unschedulable yet", []*corev1.Pod{fit, builder.Pod("ns", "fresh").Nominated("n1").Obj()}, map[string]string{"fit": "n2"}},
		{"bound", []*corev1.Pod{fit, builder.Pod("ns", "bound").Nominated("n1").Node("n1").Obj()}, map[string]string{"fit": "n2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for p, node := range withHeld(map[*corev1.Pod]string{fit: "n2"}, tc.pods, map[string]string{"n1": "", "n2": ""}) {
				got[p.Name] = node
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placed (-want +got):\n%s", diff)
			}
		})
	}
}
