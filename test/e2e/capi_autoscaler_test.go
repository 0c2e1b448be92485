package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/clusterapi"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The autoscaler's Cluster API provider against the real Cluster API
// controllers: Machines of MachineDeployments become kwok Nodes through the
// test infrastructure provider.

// gpuNICSlices are 4 GPUs and 4 NICs, GPU i and NIC i on PCIe root pci<i>,
// as the test's drivers publish them.
func (s *scenario) gpuNICSlices() []*resourceapi.ResourceSlice {
	var gpus, nics []*builder.DeviceBuilder
	for i := range 4 {
		root := fmt.Sprintf("pci%d", i)
		gpus = append(gpus, builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, root))
		nics = append(nics, builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, root))
	}
	return []*resourceapi.ResourceSlice{
		builder.ResourceSlice("gpus", "", s.gpu, "").Devices(gpus...).Obj(),
		builder.ResourceSlice("nics", "", s.nic, "").Devices(nics...).Obj(),
	}
}

// draTemplate is the ConfigMap the clusterapi provider reads a group's
// DRA template from: the slices a node of the group publishes.
func draTemplate(t *testing.T, ns, name string, slices []*resourceapi.ResourceSlice) *corev1.ConfigMap {
	t.Helper()
	var docs []string
	for _, s := range slices {
		c := s.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceSlice"}
		c.ObjectMeta = metav1.ObjectMeta{Name: s.Name}
		c.Spec.NodeName, c.Spec.AllNodes = nil, nil
		c.Spec.Pool = resourceapi.ResourcePool{}
		data, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{clusterapi.DRATemplateKey: strings.Join(docs, "---\n")}}
}

// capiGroup creates a MachineDeployment of cluster c1 in the test's
// namespace whose machines have capacity and slices; its scale-from-zero
// template comes from upstream's capacity annotations only (the infra
// template publishes no status.capacity), plus extra annotations.
func (s *scenario) capiGroup(t *testing.T, env *framework.CAPI, name string, cpu, memory string, slices []*resourceapi.ResourceSlice, extra ...string) {
	t.Helper()
	s.capiGroupWith(t, env, name, cpu, memory, slices, nil, extra...)
}

// capiGroupWith is capiGroup with options on the MachineDeployment.
func (s *scenario) capiGroupWith(t *testing.T, env *framework.CAPI, name string, cpu, memory string, slices []*resourceapi.ResourceSlice, opts []capi.GroupOption, extra ...string) {
	t.Helper()
	spec := infra.MachineSpec{
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Labels:   map[string]string{testLabel: s.ns},
	}
	for _, sl := range slices {
		spec.ResourceSlices = append(spec.ResourceSlices, capi.NodeSlice(sl))
	}
	tmpl := capi.MachineTemplate(s.ns, name, spec)
	tmpl.SetAnnotations(map[string]string{infra.PublishCapacityAnnotation: "false"})
	annotations := append([]string{
		"capacity.cluster-autoscaler.kubernetes.io/cpu", cpu,
		"capacity.cluster-autoscaler.kubernetes.io/memory", memory,
		"capacity.cluster-autoscaler.kubernetes.io/labels", testLabel + "=" + s.ns,
	}, extra...)
	opts = append([]capi.GroupOption{capi.Bounds(0, 5), capi.Annotations(annotations...)}, opts...)
	env.Create(s.ctx, t, tmpl, capi.MachineDeployment(s.ns, "c1", name, name, opts...))
}

// capiNodes are the Nodes of the group's Machines.
func capiNodes(ctx context.Context, env *framework.CAPI, ns, group string) ([]string, string, error) {
	ms, _, err := env.Machines(ctx, ns, group)
	if err != nil {
		return nil, "", err
	}
	var nodes []string
	for _, m := range ms {
		if m.NodeName != "" && !m.Deleting {
			nodes = append(nodes, m.NodeName)
		}
	}
	return nodes, capi.Summary(ms), nil
}

// Scale from zero with only annotations and a DRA template ConfigMap: a
// pod pairing a GPU with the NIC on its PCIe root gets one Machine, whose
// Node the real scheduler binds it to, GPU i with NIC i. A CPU group
// beside it, from upstream's annotations alone, does not grow.
func TestCAPIScaleFromZeroDRA(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	slices := s.gpuNICSlices()
	s.c.Create(s.ctx, t, draTemplate(t, s.ns, "gpu-dra", slices))
	s.capiGroup(t, env, "gpu", "16", "64Gi", slices, clusterapi.AnnotationDRATemplate, "gpu-dra")
	s.capiGroup(t, env, "cpu", "4", "16Gi", nil)
	s.c.StartAutoscaler(t, nil, env.AutoscalerArgs(s.ns, "c1")...)
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	framework.Eventually(s.ctx, t, 3*time.Minute, "infer bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 1, seen, err
	})
	pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, "infer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler may bind before Cluster API records the Machine's
	// nodeRef.
	framework.Eventually(s.ctx, t, time.Minute, "infer on the GPU group's one machine", func(ctx context.Context) (bool, string, error) {
		gpuNodes, summary, err := capiNodes(ctx, env, s.ns, "gpu")
		return err == nil && len(gpuNodes) == 1 && gpuNodes[0] == pod.Spec.NodeName, "infer on " + pod.Spec.NodeName + "; machines " + summary, err
	})
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
	if gpuDev == "" || strings.TrimPrefix(gpuDev, "gpu-") != strings.TrimPrefix(nicDev, "nic-") {
		t.Errorf("infer got %s with %s: not on one PCIe root", gpuDev, nicDev)
	}
	if cpu, summary, _ := capiNodes(s.ctx, env, s.ns, "cpu"); len(cpu) != 0 {
		t.Errorf("the CPU group grew: %s", summary)
	}
}

// A CPU group from upstream's annotations alone grows by two Machines for
// two 3-CPU pods; when one pod goes, scale-down marks exactly its Machine
// with delete-machine, lowers replicas, and that Machine and its Node go
// while the other stays.
func TestCAPIScaleUpAndDownCPU(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	s.capiGroup(t, env, "cpu", "4", "16Gi", nil)
	s.c.StartAutoscaler(t, nil, append(env.AutoscalerArgs(s.ns, "c1"), fastScaleDown...)...)
	for i := range 2 {
		p := s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj()
		p.Annotations = map[string]string{safeToEvict: "true"}
		s.c.Create(s.ctx, t, p)
	}
	framework.Eventually(s.ctx, t, 3*time.Minute, "both pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	framework.Eventually(s.ctx, t, time.Minute, "2 machines with nodes", func(ctx context.Context) (bool, string, error) {
		nodes, summary, err := capiNodes(ctx, env, s.ns, "cpu")
		return err == nil && len(nodes) == 2, summary, err
	})
	gone, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Every Machine ever seen marked, from a watch: the mark lives only
	// until the Machine goes.
	w, err := env.Dynamic.Resource(capi.MachineResource).Namespace(s.ns).Watch(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	marked := map[string]bool{} // nodes whose Machine was seen marked
	go func() {
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				if m := capi.MachineOf(u); m.DeleteMarked {
					mu.Lock()
					marked[m.NodeName] = true
					mu.Unlock()
				}
			}
		}
	}()
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	idle := gone.Spec.NodeName
	framework.Eventually(s.ctx, t, 3*time.Minute, "the idle machine removed", func(ctx context.Context) (bool, string, error) {
		ms, _, err := env.Machines(ctx, s.ns, "cpu")
		if err != nil {
			return false, "", err
		}
		nodes, summary, err := capiNodes(ctx, env, s.ns, "cpu")
		if err != nil {
			return false, "", err
		}
		return len(ms) == 1 && len(nodes) == 1 && nodes[0] != idle, summary, nil
	})
	mu.Lock()
	if len(marked) != 1 || !marked[idle] {
		t.Errorf("machines marked with delete-machine (by node): %v; want exactly the idle node %s's", marked, idle)
	}
	mu.Unlock()
	web0, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nodes, summary, _ := capiNodes(s.ctx, env, s.ns, "cpu"); len(nodes) != 1 || nodes[0] != web0.Spec.NodeName || web0.DeletionTimestamp != nil {
		t.Errorf("after scale-down: machines %s, web-0 on %s", summary, web0.Spec.NodeName)
	}
	if _, err := s.c.Client.CoreV1().Nodes().Get(s.ctx, idle, metav1.GetOptions{}); err == nil {
		t.Errorf("node %s of the removed machine is still there", idle)
	}
}

// The autoscaler authenticated as its ServiceAccount, with exactly the
// deploy/clusterapi overlay's rights (the base and the provider's rules, on
// the workload and the management cluster, here one API server), scales a
// MachineDeployment up and down without a single forbidden call; the
// ServiceAccount may not create Nodes (the kwok provider's rule is not in
// the base). Not parallel: it applies the base's cluster-wide objects, as
// TestDeployManifestsRBAC does.
func TestCAPIRBAC(t *testing.T) {
	s := newScenario(t)
	applyDeploy(s.ctx, t, s.c, s.c.Kustomize(t, "deploy/clusterapi"), "cluster-autoscaler")
	// No kwok bindings an earlier test of this binary applied.
	if err := s.c.Client.RbacV1().ClusterRoleBindings().Delete(s.ctx, "cluster-autoscaler-kwok", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := s.c.Client.RbacV1().RoleBindings(deployNS).Delete(s.ctx, "cluster-autoscaler-kwok", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + deployNS + ":cluster-autoscaler",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "nodes"},
	}}
	// The authorizer's cache follows the deletions above.
	framework.Eventually(s.ctx, t, 30*time.Second, "the ServiceAccount may not create nodes", func(ctx context.Context) (bool, string, error) {
		got, err := s.c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return !got.Status.Allowed, "allowed: " + got.Status.Reason, nil
	})
	kubeconfig := s.c.ServiceAccountKubeconfig(s.ctx, t, deployNS, "cluster-autoscaler")
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	s.capiGroup(t, env, "cpu", "4", "16Gi", nil)
	args := append(env.AutoscalerArgs(s.ns, "c1"), "--kubeconfig="+kubeconfig, "--cloud-config="+kubeconfig, "--namespace="+deployNS)
	a := s.c.StartAutoscaler(t, nil, append(args, fastScaleDown...)...)
	s.c.Create(s.ctx, t, s.pod("web").CPU("3").Obj())
	framework.Eventually(s.ctx, t, 3*time.Minute, "web bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 1, seen, err
	})
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(s.ctx, t, 3*time.Minute, "the idle machine removed", func(ctx context.Context) (bool, string, error) {
		ms, _, err := env.Machines(ctx, s.ns, "cpu")
		return err == nil && len(ms) == 0, capi.Summary(ms), err
	})
	if m := forbidden.FindAllString(a.Log(), -1); len(m) > 0 {
		t.Errorf("%d forbidden errors in the log:\n%s", len(m), grepLines(a.Log(), "orbidden"))
	}
}

// A gang over one MachineDeployment, all or nothing, through Cluster API
// (which names no machine when asked): of the gang's three new Machines
// one never provisions, so after --max-node-provision-time the attempt is
// given up. Nothing proves which Machines the attempt created (a
// MachineHealthCheck could have made one meanwhile), so the undo removes
// none of them: the one that never provisioned goes at its own deadline,
// as any instance that never registers; the idle one and the one a pod of
// other work landed on are released to scale-down, and the Machine that
// was there before stays.
func TestCAPIGangUndone(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	env := s.c.CAPI(t)
	env.NewCluster(s.ctx, t, s.ns, "c1")
	s.capiGroup(t, env, "cpu", "4", "16Gi", nil)
	md, err := env.Dynamic.Resource(capi.MachineDeploymentResource).Namespace(s.ns).Get(s.ctx, "cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Scale(s.ctx, t, md, 1)
	before := env.WaitMachines(s.ctx, t, 90*time.Second, s.ns, "cpu", "the machine from before", framework.RunningWithNodes(1))[0]
	s.c.Create(s.ctx, t, s.pod("old-work").CPU("3").Node(before.NodeName).Obj())
	// From now on new machines never provision, unless told otherwise.
	tmpl, err := env.Dynamic.Resource(infra.MachineTemplateResource).Namespace(s.ns).Get(s.ctx, "cpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Annotate(s.ctx, t, tmpl, map[string]*string{infra.FaultAnnotation: ptrTo(string(infra.NeverProvision))})
	a := s.c.StartAutoscaler(t, nil, append(env.AutoscalerArgs(s.ns, "c1"), "--max-node-provision-time=40s")...)
	s.c.Create(s.ctx, t, builder.PodGroup(s.ns, "train").MinCount(3).Obj())
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("train-%d", i)).CPU("3").PodGroup("train").Obj())
	}
	var fresh []capi.Machine
	framework.Eventually(s.ctx, t, 2*time.Minute, "the gang's 3 machines asked for", func(ctx context.Context) (bool, string, error) {
		ms, _, err := env.Machines(ctx, s.ns, "cpu")
		if err != nil {
			return false, "", err
		}
		fresh = fresh[:0]
		for _, m := range ms {
			if m.Name != before.Name {
				fresh = append(fresh, m)
			}
		}
		return len(fresh) == 3, capi.Summary(ms), nil
	})
	// Two of them provision after all; other work lands on one.
	for _, m := range fresh[:2] {
		dm, err := env.Dynamic.Resource(infra.MachineResource).Namespace(s.ns).Get(s.ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		env.Annotate(s.ctx, t, dm, map[string]*string{infra.FaultAnnotation: ptrTo(string(infra.NoFault))})
	}
	var busyNode, idleNode string
	framework.Eventually(s.ctx, t, 90*time.Second, "two of the gang's machines with nodes", func(ctx context.Context) (bool, string, error) {
		ms, _, err := env.Machines(ctx, s.ns, "cpu")
		if err != nil {
			return false, "", err
		}
		var nodes []string
		for _, m := range ms {
			if m.Name != before.Name && m.NodeName != "" {
				nodes = append(nodes, m.NodeName)
			}
		}
		if len(nodes) == 2 {
			busyNode, idleNode = nodes[0], nodes[1]
		}
		return len(nodes) == 2, capi.Summary(ms), nil
	})
	s.c.Create(s.ctx, t, s.pod("other-work").CPU("1").Node(busyNode).Obj())
	framework.Eventually(s.ctx, t, 3*time.Minute, "the attempt given up, its unprovisioned machine gone", func(ctx context.Context) (bool, string, error) {
		nodes, summary, err := capiNodes(ctx, env, s.ns, "cpu")
		if err != nil {
			return false, "", err
		}
		ms, _, err := env.Machines(ctx, s.ns, "cpu")
		return err == nil && len(ms) == 3 && len(nodes) == 3 && strings.Contains(a.Log(), "Gang scale-up given up"), summary, err
	})
	nodes, summary, _ := capiNodes(s.ctx, env, s.ns, "cpu")
	kept := map[string]bool{}
	for _, n := range nodes {
		kept[n] = true
	}
	if !kept[before.NodeName] || !kept[busyNode] || !kept[idleNode] {
		t.Errorf("machines after the undo: %s; want %s (before), %s (busy) and %s (idle, released to scale-down) kept", summary, before.NodeName, busyNode, idleNode)
	}
	for _, p := range []string{"old-work", "other-work"} {
		got, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, p, metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s: %v (deleting %v)", p, err, got != nil && got.DeletionTimestamp != nil)
		}
	}
}

func ptrTo(s string) *string { return &s }
