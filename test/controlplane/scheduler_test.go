package controlplane

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// The scheduler's configuration holds default-scheduler as it was and the
// pool profile with its addedAffinity, and kube-scheduler's own loader
// (through the simulator, which uses it) accepts it.
func TestSchedulerConfigProfiles(t *testing.T) {
	cfg := &ClusterConfig{StateDir: t.TempDir()}
	path, err := writeSchedulerConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{corev1.DefaultSchedulerName, PoolSchedulerName} {
		_, ctx := ktesting.NewTestContext(t)
		r, err := framework.New(ctx, framework.Options{ConfigFile: path, SchedulerName: name})
		if err != nil {
			t.Fatalf("profile %s: %v", name, err)
		}
		a := r.Profile().AddedAffinity
		if pool := name == PoolSchedulerName; (a != nil) != pool {
			t.Errorf("profile %s: addedAffinity %v, want one only on the pool profile", name, a)
		}
		if a != nil {
			req := a.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
			if req.Key != PoolLabel || len(req.Values) != 1 || req.Values[0] != PoolValue {
				t.Errorf("profile %s requires %+v, want %s=%s", name, req, PoolLabel, PoolValue)
			}
		}
	}
}
