package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// Two replicas with leader election: only the leader scales, so 3 pods
// needing a node each get exactly 3 nodes, not 6.
func TestLeaderElectionOnlyLeaderActs(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 10)
	cpu.BootDelay.Duration = 3 * time.Second // both replicas see the pods pending for several passes
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}
	le := []string{"--leader-elect=true", "--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	a := s.c.StartAutoscaler(t, cfg, le...)
	b := s.c.StartAutoscaler(t, cfg, le...)
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "3 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 3, seen, err
	})
	framework.Consistently(s.ctx, t, 4*time.Second, "exactly 3 nodes", func(ctx context.Context) (bool, string, error) {
		g, err := s.groupNodes(ctx, cpu.Name)
		return len(g) == 3, fmt.Sprintf("%d nodes", len(g)), err
	})
	leaders := 0
	for _, x := range []*framework.Autoscaler{a, b} {
		if strings.Contains(x.Log(), "Became leader") {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d replicas became leader, want 1", leaders)
	}
}

// /metrics serves the upstream-named metrics and /health-check answers.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 3)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}})
	s.c.Create(s.ctx, t, s.pod("web").CPU("1").Obj())
	want := []string{
		"cluster_autoscaler_nodes_count",
		"cluster_autoscaler_unschedulable_pods_count",
		"cluster_autoscaler_scaled_up_nodes_total",
		"cluster_autoscaler_function_duration_seconds_bucket",
		"cluster_autoscaler_last_activity",
		"cluster_autoscaler_node_group_min_count",
		"cluster_autoscaler_node_group_max_count",
		"cluster_autoscaler_node_group_target_count",
		"cluster_autoscaler_cluster_safe_to_autoscale",
	}
	framework.Eventually(s.ctx, t, time.Minute, "metrics after a scale-up", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		if err != nil {
			return false, "", err
		}
		var missing []string
		for _, w := range want {
			if !hasSample(m, w) {
				missing = append(missing, w)
			}
		}
		if !strings.Contains(m, fmt.Sprintf(`cluster_autoscaler_scaled_up_nodes_total{node_group=%q} 1`, cpu.Name)) {
			missing = append(missing, "scaled_up_nodes_total of "+cpu.Name+" = 1")
		}
		return len(missing) == 0, "missing: " + strings.Join(missing, ", "), nil
	})
	m, _ := a.Metrics(s.ctx)
	checkMetricsDoc(t, m)
	// errors_total and failed_scale_ups_total are vectors with no sample
	// until something fails; their help text must still be exported.
	for _, w := range []string{"cluster_autoscaler_errors_total", "cluster_autoscaler_failed_scale_ups_total"} {
		if !strings.Contains(m, "# HELP "+w) && !hasSample(m, w) {
			t.Errorf("metric %s not exported", w)
		}
	}
	resp, err := framework.HTTPGet(s.ctx, "http://"+a.Address+"/health-check")
	if err != nil || resp != "OK" {
		t.Errorf("/health-check = %q, %v", resp, err)
	}
}

// hasSample tells whether the exposition has a sample line of the metric.
func hasSample(exposition, name string) bool {
	for _, line := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
