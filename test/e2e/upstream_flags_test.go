package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// upstreamValuesArgs are the extraArgs a platform team typically carries
// over from the upstream chart's values file.
var upstreamValuesArgs = []string{
	"--balance-similar-node-groups=true",
	"--balancing-ignore-label=example.com/rack",
	"--cordon-node-before-terminating=true",
	"--kube-client-qps=20",
	"--kube-client-burst=40",
	"--profiling=true",
	"--scale-down-unready-time=20m",
	"--max-total-unready-percentage=45",
	"--ok-total-unready-count=3",
	"--skip-nodes-with-custom-controller-pods=true",
	"--daemonset-eviction-for-empty-nodes=false",
	"--daemonset-eviction-for-occupied-nodes=true",
	"--max-bulk-soft-taint-count=10",
	"--emit-per-nodegroup-metrics=true",
	"--expander=least-waste,priority",
	"--skip-nodes-with-local-storage=false",
	"--v=4",
	"--stderrthreshold=info",
	"--logtostderr",
}

// The flags of an upstream values file start the binary, and it scales up.
func TestUpstreamValuesFlagsScaleUp(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 3)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}, upstreamValuesArgs...)
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "2 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	nodes, err := s.groupNodes(s.ctx, cpu.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Errorf("%d nodes, want 2", len(nodes))
	}
	if a.Exited() {
		t.Fatalf("the autoscaler exited:\n%s", a.Log())
	}
}

// A command line with three flags nobody knows names all three at once
// and exits non-zero; so does one with a refused upstream flag, saying
// what to use instead, and auto-discovery with a provider that has none.
func TestUnsupportedFlagsNamedAtOnce(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	base := []string{"--kubeconfig=" + c.Kubeconf, "--cloud-provider=kwok", "--cloud-config=/nonexistent", "--leader-elect=false"}
	tests := []struct {
		name  string
		args  []string
		wants []string
	}{
		{name: "three unknown flags",
			args:  []string{"--balance-similar-nodegroup=true", "--scale-down-unneded-time=5m", "--no-such-flag"},
			wants: []string{"3 unsupported flag(s)", "--balance-similar-nodegroup: unknown flag", "--scale-down-unneded-time: unknown flag", "--no-such-flag: unknown flag"}},
		{name: "refused upstream flags",
			args:  []string{"--gpu-total=nvidia.com/gpu:0:16", "--kubernetes=https://example.com"},
			wants: []string{"--gpu-total: upstream's flag is not supported here;", "--kubernetes: upstream's flag is not supported here; use --kubeconfig"}},
		{name: "auto-discovery without a provider that discovers",
			args:  []string{"--node-group-auto-discovery=clusterapi:namespace=default"},
			wants: []string{"--node-group-auto-discovery: only --cloud-provider=clusterapi discovers node groups"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out := c.RunAutoscaler(t, time.Minute, append(append([]string(nil), base...), tc.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want non-zero:\n%s", out)
			}
			for _, w := range tc.wants {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// Two identical groups in two zones and 4 pods that each need a whole
// node: balanced 2+2; with the zone compared (--balancing-label), the
// groups are not similar and one of them takes all 4.
func TestBalanceSimilarNodeGroups(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want func(a, b int) bool
		says string
	}{
		{name: "zone-ignored", args: []string{"--balance-similar-node-groups"},
			want: func(a, b int) bool { return a == 2 && b == 2 }, says: "2+2"},
		{name: "zone-compared", args: []string{"--balance-similar-node-groups", "--balancing-label=" + corev1.LabelTopologyZone},
			want: func(a, b int) bool { return a+b == 4 && (a == 0 || b == 0) }, says: "4+0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			za, zb := s.zonalGroup("za", "zone-a"), s.zonalGroup("zb", "zone-b")
			// The pods are pending and marked unschedulable before the
			// autoscaler starts, so one loop plans all four.
			for i := range 4 {
				s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
			}
			for i := range 4 {
				s.waitUnschedulable(t, fmt.Sprintf("web-%d", i))
			}
			s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{za, zb}}, tc.args...)
			framework.Eventually(s.ctx, t, 2*time.Minute, "4 pods bound", func(ctx context.Context) (bool, string, error) {
				n, seen, err := s.podsSeen(ctx)
				return n == 4, seen, err
			})
			framework.Consistently(s.ctx, t, 3*time.Second, tc.says, func(ctx context.Context) (bool, string, error) {
				counts, seen, err := s.nodeCounts(ctx, za, zb)
				if err != nil {
					return false, "", err
				}
				return tc.want(counts[0], counts[1]), seen, nil
			})
		})
	}
}
