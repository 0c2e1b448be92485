package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// Two MachineDeployments, each with one idle Machine; one is annotated
// with upstream's per-group option scaledownunneededtime=1h. With the flag
// at 2s, the other group's Machine is removed and the annotated one stays
// for passes after that (issue 40: the annotation was documented, never
// read).
func TestCAPIGroupOptions(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	s.capiGroupWith(t, env, "keep", "4", "16Gi", nil, []capi.GroupOption{capi.Replicas(1)},
		"cluster.x-k8s.io/autoscaling-options-scaledownunneededtime", "1h")
	s.capiGroupWith(t, env, "free", "4", "16Gi", nil, []capi.GroupOption{capi.Replicas(1)})
	for _, g := range []string{"keep", "free"} {
		framework.Eventually(s.ctx, t, 2*time.Minute, g+"'s machine has a node", func(ctx context.Context) (bool, string, error) {
			nodes, summary, err := capiNodes(ctx, env, s.ns, g)
			return err == nil && len(nodes) == 1, summary, err
		})
	}
	s.c.StartAutoscaler(t, nil, append(env.AutoscalerArgs(s.ns, "c1"), fastScaleDown...)...)
	framework.Eventually(s.ctx, t, 2*time.Minute, "free's idle machine removed", func(ctx context.Context) (bool, string, error) {
		ms, _, err := env.Machines(ctx, s.ns, "free")
		_, summary, _ := capiNodes(ctx, env, s.ns, "free")
		return err == nil && len(ms) == 0, summary, err
	})
	// Passes run every second or so: ten more seconds is many times the
	// flag's 2s, a small part of the group's hour.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		nodes, summary, err := capiNodes(s.ctx, env, s.ns, "keep")
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 1 {
			t.Fatalf("the group with scaledownunneededtime=1h lost its idle machine: %s", summary)
		}
		time.Sleep(time.Second)
	}
}
