package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The externalgrpc tests run the kwok provider behind cmd/externalgrpc-kwok
// (mTLS, certificates made by the test) and the autoscaler with
// --cloud-provider=externalgrpc: everything the autoscaler knows of the
// groups crosses the wire.

// startOverGRPC serves the groups over gRPC and starts the autoscaler
// against that server.
func (s *scenario) startOverGRPC(t *testing.T, serverArgs []string, groups []kwok.NodeGroupConfig, args ...string) (*framework.GRPCServer, *framework.Autoscaler) {
	srv := s.c.StartGRPCServer(t, kwok.Config{NodeGroups: groups}, serverArgs...)
	a := s.c.StartAutoscaler(t, kwok.Config{}, append([]string{"--cloud-provider=externalgrpc", "--cloud-config=" + srv.ClientConfig}, args...)...)
	return srv, a
}

// kwokBehindGRPC is a kwok provider over the test's groups, for a gRPC
// server the test runs in-process (framework.ServeGRPCWith); it is cleaned
// up with the test.
func (s *scenario) kwokBehindGRPC(t *testing.T, groups ...kwok.NodeGroupConfig) *kwok.Provider {
	t.Helper()
	kp, err := kwok.New(s.c.Client, &kwok.Config{NodeGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kp.Cleanup() })
	return kp
}

// Scale from zero through the extension's template: no node of the GPU
// group exists, so the ResourceSlices the simulator needs come only from
// NodeGroupTemplate. The real scheduler binds the pods on one new node,
// each GPU paired with the NIC on its PCIe root; then, the pods gone, the
// nodes are removed through NodeGroupDeleteNodes.
func TestExternalGRPCDRAScaleFromZeroAndDown(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	gpu, cpu := s.gpuGroup("gpu", 2, 8), s.cpuGroup("cpu", 2)
	srv, _ := s.startOverGRPC(t, []string{"--v=4"}, []kwok.NodeGroupConfig{gpu, cpu}, fastScaleDown...)
	tmpl := s.gpuNICTemplate(t)
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("infer-%d", i)).CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	}
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "all 3 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 3, seen, err
	})
	counts, seen, err := s.nodeCounts(s.ctx, gpu, cpu)
	if err != nil || counts[0] != 1 || counts[1] != 1 {
		t.Fatalf("nodes %s (%v), want one GPU and one CPU node", seen, err)
	}
	for i := range 2 {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, fmt.Sprintf("infer-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).Get(s.ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		devs := map[string]string{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			devs[r.Driver] = r.Device
		}
		if devs[s.gpu] == "" || strings.TrimPrefix(devs[s.gpu], "gpu-") != strings.TrimPrefix(devs[s.nic], "nic-") {
			t.Errorf("%s got %v: not a GPU and the NIC on its PCIe root", pod.Name, devs)
		}
	}
	if log := srv.Log(); !strings.Contains(log, "CloudProviderExtension/NodeGroupTemplate") || !strings.Contains(log, "CloudProviderExtension/NodeGroupIncreaseSize") {
		t.Error("the server never answered the extension's NodeGroupTemplate and NodeGroupIncreaseSize")
	}

	if err := s.c.Client.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "both groups back to zero", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, gpu, cpu)
		return err == nil && counts[0] == 0 && counts[1] == 0, seen, err
	})
	if !strings.Contains(srv.Log(), "CloudProvider/NodeGroupDeleteNodes") {
		t.Error("the nodes went without a NodeGroupDeleteNodes call")
	}
}

// A gang of 8 one-GPU pods on 2-GPU nodes: 4 nodes in one
// NodeGroupAtomicIncreaseSize, and all 8 bound.
func TestExternalGRPCGangAtomic(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.gpuGroup("gpu2", 8, 2)
	srv, _ := s.startOverGRPC(t, []string{"--v=4"}, []kwok.NodeGroupConfig{g})
	s.gang(t, "train", 8, "")
	framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 8, seen, err
	})
	counts, seen, err := s.nodeCounts(s.ctx, g)
	if err != nil || counts[0] != 4 {
		t.Fatalf("nodes: %s (%v), want 4", seen, err)
	}
	framework.Eventually(s.ctx, t, 30*time.Second, "a PodGroup event of one +4 scale-up", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, "train", "TriggeredScaleUp")
		return len(msgs) > 0 && strings.Contains(msgs[0], g.Name+" +4"), fmt.Sprintf("%q", msgs), err
	})
	if n := strings.Count(srv.Log(), "CloudProviderExtension/NodeGroupAtomicIncreaseSize"); n != 1 {
		t.Errorf("%d NodeGroupAtomicIncreaseSize calls, want exactly 1", n)
	}
}

// A server written for upstream's protocol as it was before
// resourceSliceBytes (no extension, Node-only templates): the CPU group
// still scales; a DRA pod cannot be placed, the GPU group stays empty and
// the pod hears why.
func TestExternalGRPCUpstreamOnlyServer(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	gpu, cpu := s.gpuGroup("gpu", 2, 8), s.cpuGroup("cpu", 2)
	s.startOverGRPC(t, []string{"--upstream-only", "--no-template-slices"}, []kwok.NodeGroupConfig{gpu, cpu})
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "the CPU pod bound", func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", describePod(p), err
	})
	framework.Eventually(s.ctx, t, time.Minute, "NotTriggerScaleUp on the DRA pod", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, "infer", "NotTriggerScaleUp")
		return len(msgs) > 0, fmt.Sprintf("%q", msgs), err
	})
	// This test's autoscaler names the GPU group: upstream's template has
	// no devices, so the claim cannot be allocated on it, and it says so.
	framework.Eventually(s.ctx, t, time.Minute, "the DRA pod told the GPU group has no devices", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, "infer", "NotTriggerScaleUp")
		for _, m := range msgs {
			if strings.Contains(m, gpu.Name+": DynamicResources: cannot allocate all claims") &&
				strings.Contains(m, "publishes no device template for node group "+gpu.Name) {
				return true, "", err
			}
		}
		return false, fmt.Sprintf("%q", msgs), err
	})
	counts, seen, err := s.nodeCounts(s.ctx, gpu, cpu)
	if err != nil || counts[0] != 0 || counts[1] != 1 {
		t.Fatalf("nodes %s (%v), want no GPU node and one CPU node", seen, err)
	}
}

// A server written for upstream's protocol with resourceSliceBytes
// (kubernetes/autoscaler PR #10303) and no extension: the DRA pod scales
// the GPU group from zero through the slices of NodeGroupTemplateNodeInfo,
// and the real scheduler binds it with a GPU and the NIC on its PCIe root.
func TestExternalGRPCUpstreamTemplateSlices(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	gpu := s.gpuGroup("gpu", 2, 8)
	srv, _ := s.startOverGRPC(t, []string{"--upstream-only", "--v=4"}, []kwok.NodeGroupConfig{gpu})
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "the DRA pod bound", func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "infer", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", describePod(p), err
	})
	counts, seen, err := s.nodeCounts(s.ctx, gpu)
	if err != nil || counts[0] != 1 {
		t.Fatalf("nodes %s (%v), want one GPU node", seen, err)
	}
	log := srv.Log()
	if !strings.Contains(log, "CloudProvider/NodeGroupTemplateNodeInfo") || !strings.Contains(log, "CloudProvider/NodeGroupIncreaseSize") {
		t.Error("the server never answered upstream's NodeGroupTemplateNodeInfo and NodeGroupIncreaseSize")
	}
	if strings.Contains(log, "CloudProviderExtension/") {
		t.Error("an upstream-only server answered an extension call")
	}
}

// A reservation the server reports through the extension is used first:
// of two pods needing a node each, one lands on the reservation's group
// (count 1), the other on the on-demand group.
func TestExternalGRPCReservationFirst(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	res, ond := s.oneGPUGroups("gpu-reserved", "gpu-ondemand", 0)
	srv := s.c.StartGRPCServer(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{res, ond},
		Reservations: []kwok.ReservationConfig{{ID: s.ns + "-res", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{res.Name}, Count: 1}}})
	s.c.StartAutoscaler(t, kwok.Config{}, "--cloud-provider=externalgrpc", "--cloud-config="+srv.ClientConfig)
	tmpl := s.gpuTemplate(t)
	s.c.Create(s.ctx, t, s.gpuPod("first", tmpl, ""))
	s.waitOnGroup(t, "first", res.Name)
	s.c.Create(s.ctx, t, s.gpuPod("second", tmpl, ""))
	s.waitOnGroup(t, "second", ond.Name)
	counts, seen, err := s.nodeCounts(s.ctx, res, ond)
	if err != nil || counts[0] != 1 || counts[1] != 1 {
		t.Fatalf("nodes %s (%v), want one reserved and one on-demand", seen, err)
	}
}

// A best-effort-atomic ProvisioningRequest over gRPC: 8 one-GPU pods on
// 2-GPU nodes are 4 nodes in one NodeGroupAtomicIncreaseSize. Serial, as
// the other ProvisioningRequest tests are.
func TestExternalGRPCProvReqAtomic(t *testing.T) {
	s := newProvScenario(t)
	g := s.gpuGroup("gpu2", 8, 2)
	srv, _ := s.startOverGRPC(t, []string{"--v=4"}, []kwok.NodeGroupConfig{g})
	name := s.kueueRequest(t, "train", v1.ProvisioningClassBestEffortAtomicScaleUp, 8, true)
	wantReason(t, s.waitCondition(t, name, v1.Provisioned, metav1.ConditionTrue, 2*time.Minute), provreq.ReasonCapacityIsProvisioned, g.Name+" +4")
	framework.Eventually(s.ctx, t, time.Minute, "4 nodes", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, g)
		return err == nil && counts[0] == 4, seen, err
	})
	if n := strings.Count(srv.Log(), "CloudProviderExtension/NodeGroupAtomicIncreaseSize"); n != 1 {
		t.Errorf("%d NodeGroupAtomicIncreaseSize calls, want exactly 1", n)
	}
}

// The server killed while pods wait and started again: the autoscaler
// does not crash, scales nothing while the server is gone, and then adds
// exactly the nodes the pods need.
func TestExternalGRPCServerRestart(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 5)
	srv, a := s.startOverGRPC(t, nil, []kwok.NodeGroupConfig{cpu})
	framework.Eventually(s.ctx, t, time.Minute, "a first good pass", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		return err == nil && strings.Contains(m, "cluster_autoscaler_node_groups_count 1"), "", err
	})
	srv.Kill()
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}
	framework.Eventually(s.ctx, t, time.Minute, "passes failing with cloudProviderError", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		v := metricValue(m, "cluster_autoscaler_errors_total", `type="cloudProviderError"`)
		return err == nil && v > 0, fmt.Sprintf("errors_total{cloudProviderError} = %v", v), err
	})
	framework.Consistently(s.ctx, t, 4*time.Second, "nothing scaled while the server is down", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, cpu)
		return err == nil && counts[0] == 0 && !a.Exited(), seen, err
	})
	if !strings.Contains(a.Log(), "externalgrpc "+srv.Address) {
		t.Error("the autoscaler's log does not name the server of the failed calls")
	}
	srv.Start(t)
	framework.Eventually(s.ctx, t, 2*time.Minute, "all 3 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 3, seen, err
	})
	framework.Consistently(s.ctx, t, 4*time.Second, "exactly 3 nodes", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, cpu)
		return err == nil && counts[0] == 3, seen, err
	})
	if a.Exited() {
		t.Fatal("the autoscaler exited")
	}
}

// Per-group options cross the wire: the server's group with
// scaleDownUnneededTime 1h (kwok options) keeps its idle node while the
// other group's goes after the flag's 2s, and the server answered
// NodeGroupGetOptions (issue 40: nothing called it).
func TestExternalGRPCGroupOptions(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	keep, free := s.cpuGroup("keep", 2), s.cpuGroup("free", 2)
	keep.Options = &kwok.GroupOptionsConfig{ScaleDownUnneededTime: &metav1.Duration{Duration: time.Hour},
		MaxNodeProvisionTime: &metav1.Duration{Duration: 30 * time.Minute}}
	srv, _ := s.startOverGRPC(t, []string{"--v=4"}, []kwok.NodeGroupConfig{keep, free}, append(fastScaleDown, "--namespace="+s.ns)...)
	for _, g := range []kwok.NodeGroupConfig{keep, free} {
		s.c.Create(s.ctx, t, s.pod("on-"+g.Name).CPU("3").NodeSelector(kwok.LabelNodeGroup, g.Name).Obj())
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "both pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	if err := s.c.Client.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the other group's idle node removed", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, keep, free)
		return err == nil && counts[1] == 0, seen, err
	})
	// Many times the flag's 2s, a small part of the group's hour.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if counts, seen, err := s.nodeCounts(s.ctx, keep, free); err != nil || counts[0] != 1 {
			t.Fatalf("the group with scaleDownUnneededTime 1h: nodes %s (%v), want its idle node kept", seen, err)
		}
	}
	if !strings.Contains(srv.Log(), "CloudProvider/NodeGroupGetOptions") {
		t.Error("the server never answered NodeGroupGetOptions")
	}
	// The status says which values each group runs with.
	framework.Eventually(s.ctx, t, time.Minute, "the groups' options in the status", func(ctx context.Context) (bool, string, error) {
		st, err := s.statusOf(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		got := map[string]string{}
		for _, g := range st.NodeGroups {
			if o := g.Options; o != nil {
				got[g.Name] = fmt.Sprintf("%s %s %s", o.From, o.ScaleDownUnneededTime.Duration, o.MaxNodeProvisionTime.Duration)
			}
		}
		return got[keep.Name] == "provider 1h0m0s 30m0s" && strings.HasPrefix(got[free.Name], "flags 2s "), fmt.Sprint(got), nil
	})
}
