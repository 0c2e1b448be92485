package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// Scale from zero: three pods each claiming a GPU plus the NIC on its PCIe
// root make the GPU group grow by exactly one node (8 pairs fit one node);
// the real scheduler binds all three there, each GPU paired with its NIC.
// CPU-only pods, meanwhile, grow the CPU group and not the GPU group.
func TestScaleUpFromZeroGPUAndCPU(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	gpu, cpu := s.gpuGroup("gpu", 4, 8), s.cpuGroup("cpu", 4)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{gpu, cpu}})
	tmpl := s.gpuNICTemplate(t)
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("infer-%d", i)).CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	}
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "all 5 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 5, seen, err
	})
	gpuNodes, _ := s.groupNodes(s.ctx, gpu.Name)
	cpuNodes, _ := s.groupNodes(s.ctx, cpu.Name)
	if len(gpuNodes) != 1 || len(cpuNodes) != 2 {
		t.Fatalf("GPU group has %d nodes (want 1), CPU group %d (want 2: 3 CPUs per pod, 4 per node)", len(gpuNodes), len(cpuNodes))
	}
	for i := range 3 {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, fmt.Sprintf("infer-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != gpuNodes[0].Name {
			t.Errorf("%s on %s, want the new GPU node %s", pod.Name, pod.Spec.NodeName, gpuNodes[0].Name)
		}
		claim, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).Get(s.ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var gpuDev, nicDev string
		for _, r := range claim.Status.Allocation.Devices.Results {
			switch r.Driver {
			case s.gpu:
				gpuDev = r.Device
			case s.nic:
				nicDev = r.Device
			}
		}
		if strings.TrimPrefix(gpuDev, "gpu-") != strings.TrimPrefix(nicDev, "nic-") || gpuDev == "" {
			t.Errorf("%s got %s with %s: not on one PCIe root", pod.Name, gpuDev, nicDev)
		}
	}
	// Nothing more is added once everything runs.
	framework.Consistently(s.ctx, t, 3*time.Second, "no further scale-up", func(ctx context.Context) (bool, string, error) {
		g, err := s.groupNodes(ctx, gpu.Name)
		return len(g) == 1, fmt.Sprintf("%d GPU nodes", len(g)), err
	})
}

// A group whose creations fail is backed off and another group serves the
// pods; a group whose nodes never register is given up after
// --max-node-provision-time, its target reverted.
func TestBackoffAndProvisionTimeout(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	broken := s.cpuGroup("broken", 4)
	broken.Faults.OutOfResourcesAfter = ptr.To(0)
	ghost := s.cpuGroup("ghost", 4)
	ghost.Faults.NeverRegister = true
	good := s.cpuGroup("good", 4)
	// The priority expander tries broken first, then ghost, then good.
	priorities := fmt.Sprintf("30:\n- %s\n20:\n- %s\n10:\n- .*\n", broken.Name, ghost.Name)
	s.c.Create(s.ctx, t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "cluster-autoscaler-priority-expander"},
		Data:       map[string]string{"priorities": priorities},
	})
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{broken, ghost, good}},
		"--expander=priority,least-waste", "--namespace="+s.ns, "--max-node-provision-time=8s")
	s.c.Create(s.ctx, t, s.pod("web").CPU("2").Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "pod bound to a node of "+good.Name, func(ctx context.Context) (bool, string, error) {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return strings.HasPrefix(pod.Spec.NodeName, good.Name+"-"), describePod(pod), nil
	})
	// The target gauges show the groups as a pass found them, before it
	// gave any scale-up up: the pass after the one that gave ghost up
	// shows its target back at 0, and the pod may bind before it runs.
	framework.Eventually(s.ctx, t, 30*time.Second, "metrics of the failures and reverted targets", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		if err != nil {
			return false, "", err
		}
		for _, want := range []string{
			`cluster_autoscaler_failed_scale_ups_total{reason="cloudProviderError"}`,
			`cluster_autoscaler_failed_scale_ups_total{reason="timeout"}`,
			fmt.Sprintf(`cluster_autoscaler_node_group_target_count{node_group=%q} 0`, ghost.Name),
			fmt.Sprintf(`cluster_autoscaler_node_group_target_count{node_group=%q} 0`, broken.Name),
		} {
			if !strings.Contains(m, want) {
				return false, "metrics lack " + want, nil
			}
		}
		return true, "", nil
	})
	for _, g := range []string{broken.Name, ghost.Name} {
		if nodes, _ := s.groupNodes(s.ctx, g); len(nodes) != 0 {
			t.Errorf("group %s has %d nodes, want 0", g, len(nodes))
		}
	}
}
