package observe_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// unschedulable is a pod the scheduler tried and could not place, created
// age before now.
func unschedulable(b *builder.PodBuilder, age time.Duration) *corev1.Pod {
	p := b.Obj()
	p.CreationTimestamp = metav1.NewTime(now.Add(-age))
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	}}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestSelect(t *testing.T) {
	notTried := builder.Pod("ns", "not-tried").Obj()
	notTried.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	schedulerError := unschedulable(builder.Pod("ns", "scheduler-error"), time.Hour)
	schedulerError.Status.Conditions[0].Reason = corev1.PodReasonSchedulerError
	deleted := unschedulable(builder.Pod("ns", "deleted"), time.Hour)
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	otherScheduler := unschedulable(builder.Pod("ns", "other-scheduler"), time.Hour)
	otherScheduler.Spec.SchedulerName = "volcano"
	ours := unschedulable(builder.Pod("ns", "named-default"), time.Hour)
	ours.Spec.SchedulerName = corev1.DefaultSchedulerName
	pods := []*corev1.Pod{
		notTried, schedulerError, deleted, otherScheduler, ours,
		unschedulable(builder.Pod("ns", "bound").Node("n1"), time.Hour),
		unschedulable(builder.Pod("ns", "expendable").Priority(-11), time.Hour),
		unschedulable(builder.Pod("ns", "at-cutoff").Priority(-10), time.Hour),
		unschedulable(builder.Pod("ns", "too-young"), 9*time.Second),
		unschedulable(builder.Pod("ns", "just-old-enough"), 10*time.Second),
		unschedulable(builder.Pod("ns", "b-old"), time.Hour),
		unschedulable(builder.Pod("ns", "a-old"), time.Hour),
		unschedulable(builder.Pod("ns", "oldest"), 2*time.Hour),
		unschedulable(builder.Pod("ns", "urgent").Priority(1000), time.Minute),
		unschedulable(builder.Pod("other", "a-old"), time.Hour),
		unschedulable(builder.Pod("ns", "nominated").Nominated("n1"), time.Hour),
		unschedulable(builder.Pod("ns", "nominated-to-gone").Nominated("gone"), time.Hour),
		unschedulable(builder.Pod("ns", "volume-provisioning").Volume("v", "for-n1"), time.Hour),
		unschedulable(builder.Pod("ns", "volume-for-gone").Volume("v", "for-gone"), time.Hour),
	}
	registered := map[string]bool{"n1": true}
	bindings := map[string]string{"ns/for-n1": "n1", "ns/for-gone": "gone"}
	sel := observe.PendingSelection{NewPodScaleUpDelay: 10 * time.Second, PriorityCutoff: -10, SchedulerName: corev1.DefaultSchedulerName,
		Nodes: registered, VolumeBindings: bindings}
	unheld := sel
	for _, p := range pods {
		if p.Name == "nominated" {
			unheld.Unheld = map[types.UID]bool{p.UID: true}
		}
	}
	tests := []struct {
		name string
		sel  observe.PendingSelection
		want []string
	}{
		{"filtered and ordered: priority, then age, then name", sel, []string{
			"ns/urgent", "ns/oldest", "ns/a-old", "ns/b-old", "ns/named-default", "ns/nominated-to-gone", "ns/scheduler-error", "ns/volume-for-gone", "other/a-old", "ns/just-old-enough", "ns/at-cutoff",
		}},
		{"a held pod its node cannot take any more is pending", unheld, []string{
			"ns/urgent", "ns/oldest", "ns/a-old", "ns/b-old", "ns/named-default", "ns/nominated", "ns/nominated-to-gone", "ns/scheduler-error", "ns/volume-for-gone", "other/a-old", "ns/just-old-enough", "ns/at-cutoff",
		}},
		{"any scheduler when none is set", observe.PendingSelection{NewPodScaleUpDelay: 10 * time.Second, PriorityCutoff: -10, Nodes: registered, VolumeBindings: bindings}, []string{
			"ns/urgent", "ns/oldest", "ns/a-old", "ns/b-old", "ns/named-default", "ns/nominated-to-gone", "ns/other-scheduler", "ns/scheduler-error", "ns/volume-for-gone", "other/a-old", "ns/just-old-enough", "ns/at-cutoff",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(observe.Pending(pods, tc.sel, now))); diff != "" {
				t.Errorf("Pending (-want +got):\n%s", diff)
			}
		})
	}
}
