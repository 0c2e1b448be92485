package provreq

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestAsGang(t *testing.T) {
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req", UID: "uid"}}
	pods := []*corev1.Pod{builder.Pod("ns", "req-0").Obj(), builder.Pod("ns", "req-1").Obj()}
	tests := []struct {
		name  string
		gates string
		pods  []*corev1.Pod
		group bool
	}{
		{"gangs in the scheduler: a simulated PodGroup", "GenericWorkload=true", pods, true},
		{"no gangs in the scheduler: none", "GenericWorkload=false", pods, false},
		{"the template's own group: kept", "GenericWorkload=true", []*corev1.Pod{builder.Pod("ns", "req-0").PodGroup("theirs").Obj()}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := framework.ApplyFeatureGates(tc.gates); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = framework.ApplyFeatureGates("GenericWorkload=false") })
			g := asGang(pr, tc.pods)
			if g.Key() != "ns/ProvisioningRequest/req" || g.MinCount != len(tc.pods) || len(g.Pending) != len(tc.pods) {
				t.Errorf("gang %+v", g)
			}
			if (g.Group != nil) != tc.group {
				t.Fatalf("group %v, want one: %v", g.Group, tc.group)
			}
			if !tc.group {
				return
			}
			if gp := g.Group.Spec.SchedulingPolicy.Gang; gp == nil || int(gp.MinCount) != len(tc.pods) {
				t.Errorf("group policy %+v, want gang of all %d", g.Group.Spec.SchedulingPolicy, len(tc.pods))
			}
			for i, p := range g.Pending {
				if p.Spec.SchedulingGroup == nil || *p.Spec.SchedulingGroup.PodGroupName != g.Group.Name {
					t.Errorf("member %s names no group", p.Name)
				}
				if tc.pods[i].Spec.SchedulingGroup != nil {
					t.Errorf("the request's pod %s was changed", tc.pods[i].Name)
				}
			}
		})
	}
}
