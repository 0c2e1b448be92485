package health

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// cluster is ready ready nodes and unready unready ones, all old.
func cluster(ready, unready int) []*corev1.Node {
	var out []*corev1.Node
	for i := range ready {
		out = append(out, builder.Node(fmt.Sprintf("ready-%d", i)).Obj())
	}
	for i := range unready {
		out = append(out, builder.Node(fmt.Sprintf("unready-%d", i)).NotReady().Obj())
	}
	return out
}

func TestCheck(t *testing.T) {
	opts := Options{MaxUnreadyPercentage: 45, OkUnreadyCount: 3, StartupTime: 15 * time.Minute}
	young := builder.Node("young").NotReady().Obj()
	young.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	old := builder.Node("old").NotReady().Obj()
	old.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	gone := builder.Node("gone").NotReady().Obj()
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	removing := builder.Node("removing").NotReady().Taint(drain.ToBeDeletedTaint, "1", corev1.TaintEffectNoSchedule).Obj()
	noCondition := builder.Node("silent").Obj()
	noCondition.Status.Conditions = nil
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		opts        Options
		wantHealthy bool
		wantUnready int
		wantReason  string
	}{
		{"all ready", cluster(10, 0), opts, true, 0, ""},
		{"empty cluster", nil, opts, true, 0, ""},
		{"too many, by both rules", cluster(3, 7), opts, false, 7, "7 of 10 nodes unready (70%), more than 45% and more than 3"},
		{"many in percent, few in number", cluster(1, 3), opts, true, 3, ""},
		{"many in number, few in percent", cluster(16, 4), opts, true, 4, ""},
		{"exactly the percentage is fine", cluster(11, 9), Options{MaxUnreadyPercentage: 45, OkUnreadyCount: 3}, true, 9, ""},
		{"one over the percentage", cluster(10, 10), Options{MaxUnreadyPercentage: 45, OkUnreadyCount: 3}, false, 10,
			"10 of 20 nodes unready (50%), more than 45% and more than 3"},
		{"zero tolerance", cluster(9, 1), Options{MaxUnreadyPercentage: 0, OkUnreadyCount: 0}, false, 1,
			"1 of 10 nodes unready (10%), more than 0% and more than 0"},
		{"young nodes are still starting", append(cluster(0, 0), young, young, young, young), opts, true, 0, ""},
		{"old unready nodes count", append(cluster(1, 3), old), opts, false, 4, "4 of 5 nodes unready (80%), more than 45% and more than 3"},
		{"nodes being deleted do not count", append(cluster(1, 3), gone, removing), opts, true, 3, ""},
		{"no Ready condition is unready", append(cluster(1, 3), noCondition), opts, false, 4, "4 of 5 nodes unready (80%), more than 45% and more than 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := Check(tc.nodes, now, tc.opts)
			if v.Healthy != tc.wantHealthy || v.Unready != tc.wantUnready || v.Total != len(tc.nodes) || v.Reason != tc.wantReason {
				t.Errorf("Check = %+v, want healthy %v, %d of %d unready, reason %q", v, tc.wantHealthy, tc.wantUnready, len(tc.nodes), tc.wantReason)
			}
		})
	}
}
