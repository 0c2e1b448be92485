package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// Scale-down order with reservations: both nodes idle, one on a
// reservation and one on-demand. The on-demand node goes; the reserved
// one stays as idle paid capacity (its metric and unremovable reason say
// so); an autoscaler started with --scale-down-reserved-nodes removes it.
func TestReservationsScaleDownKeepsReservedNodes(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	res, ond := s.oneGPUGroups("gpu-reserved", "gpu-ondemand", 0)
	resID := s.ns + "-res"
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{res, ond},
		Reservations: []kwok.ReservationConfig{{ID: resID, Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{res.Name}, Count: 1}}}
	a := s.c.StartAutoscaler(t, cfg, fastScaleDown...)
	tmpl := s.gpuTemplate(t)
	for i := range 2 {
		s.c.Create(s.ctx, t, s.gpuPod(fmt.Sprintf("job-%d", i), tmpl, ""))
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "both pods bound, one node in each group", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		counts, nodes, _ := s.nodeCounts(ctx, res, ond)
		return n == 2 && len(counts) == 2 && counts[0] == 1 && counts[1] == 1, seen + "; " + nodes, err
	})
	for i := range 2 {
		if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, fmt.Sprintf("job-%d", i), metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the idle on-demand node removed", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, res, ond)
		return err == nil && counts[1] == 0, seen, err
	})
	framework.Consistently(s.ctx, t, 5*time.Second, "the idle reserved node kept", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, res, ond)
		return err == nil && counts[0] == 1, seen, err
	})
	framework.Eventually(s.ctx, t, 30*time.Second, "idle paid capacity reported", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		idle := metricValue(m, "cluster_autoscaler_reservation_idle_nodes", fmt.Sprintf("reservation=%q", resID))
		kept := metricValue(m, "cluster_autoscaler_unremovable_nodes_count", `reason="ReservedCapacity"`)
		return idle == 1 && kept == 1, fmt.Sprintf("reservation_idle_nodes=%v unremovable{ReservedCapacity}=%v", idle, kept), err
	})

	a.Stop()
	s.c.StartAutoscaler(t, cfg, append(fastScaleDown, "--scale-down-reserved-nodes=true")...)
	framework.Eventually(s.ctx, t, 2*time.Minute, "the reserved node removed once the flag allows it", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, res, ond)
		return err == nil && counts[0] == 0, seen, err
	})
}
