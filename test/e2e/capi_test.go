package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi"
	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const capiGPUDriver = "gpu.capi.example.com"

// gpuMachine is the shape of the smoke tests' machines: 8 CPUs and two GPUs
// on their own PCIe roots, published by one driver.
func gpuMachine(pool string) infra.MachineSpec {
	return infra.MachineSpec{
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi")},
		Labels:   map[string]string{"example.com/pool": pool},
		// Nodes are cluster-wide: keep the other tests' pods off them.
		Taints: []corev1.Taint{{Key: "capi.example.com/smoke", Value: pool, Effect: corev1.TaintEffectNoSchedule}},
		ResourceSlices: []resourceapi.ResourceSliceSpec{capi.NodeSlice(builder.ResourceSlice("", "", capiGPUDriver, "").Devices(
			builder.Device("gpu-0").Attr("pcieRoot", "pci0"), builder.Device("gpu-1").Attr("pcieRoot", "pci1")).Obj())},
	}
}

// TestCAPIMachineDeployment: the real Cluster API controllers and the dev
// infrastructure turn replicas into Running Machines with Ready kwok Nodes
// and their ResourceSlices, and a delete-machine mark picks the Machine a
// scale-down removes.
func TestCAPIMachineDeployment(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	env := c.CAPI(t)
	ctx, ns := c.Namespace(t)
	env.NewCluster(ctx, t, ns, "c1")
	tmpl := capi.MachineTemplate(ns, "gpu", gpuMachine("gpu"))
	// Newest first: without its mark the oldest Machine would stay.
	md := capi.MachineDeployment(ns, "c1", "gpu", "gpu", capi.Bounds(0, 4), capi.DeletionOrder("Newest"))
	env.Create(ctx, t, tmpl, md)

	// Scale from zero needs the template's published capacity.
	framework.Eventually(ctx, t, 30*time.Second, "template status.capacity", func(ctx context.Context) (bool, string, error) {
		got, err := env.Dynamic.Resource(infra.MachineTemplateResource).Namespace(ns).Get(ctx, "gpu", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		cpu, _, _ := unstructured.NestedString(got.Object, "status", "capacity", "cpu")
		arch, _, _ := unstructured.NestedString(got.Object, "status", "nodeInfo", "architecture")
		return cpu == "8" && arch == "amd64", fmt.Sprintf("cpu %q arch %q", cpu, arch), nil
	})

	// v1beta1 reads go through the manager's conversion (without it the
	// API server prunes the ref to kind and name).
	v1beta1 := capi.MachineDeploymentResource
	v1beta1.Version = "v1beta1"
	old, err := env.Dynamic.Resource(v1beta1).Namespace(ns).Get(ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(old.Object, "spec", "template", "spec", "infrastructureRef", "apiVersion"); v != infra.Group+"/"+infra.Version {
		t.Errorf("v1beta1 infrastructureRef.apiVersion %q, want %s/%s", v, infra.Group, infra.Version)
	}

	env.Scale(ctx, t, md, 1)
	oldest := env.WaitMachines(ctx, t, 90*time.Second, ns, "gpu", "1 Running machine with its node", framework.RunningWithNodes(1))[0]
	time.Sleep(time.Second) // creation timestamps have second precision: make "newest" unambiguous
	env.Scale(ctx, t, md, 2)
	machines := env.WaitMachines(ctx, t, 90*time.Second, ns, "gpu", "2 Running machines with nodes", framework.RunningWithNodes(2))
	for _, m := range machines {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.ProviderID != m.ProviderID || !strings.HasPrefix(m.ProviderID, infra.ProviderIDPrefix) {
			t.Errorf("node %s providerID %q, machine's %q", node.Name, node.Spec.ProviderID, m.ProviderID)
		}
		if got := node.Status.NodeInfo.KubeletVersion; got != controlplane.KubernetesVersion {
			t.Errorf("node %s kubelet %q, want %q", node.Name, got, controlplane.KubernetesVersion)
		}
		if node.Labels["example.com/pool"] != "gpu" || node.Status.Capacity.Cpu().String() != "8" {
			t.Errorf("node %s labels %v capacity %v: not the template's", node.Name, node.Labels, node.Status.Capacity)
		}
		// The Machine can show its node before Cluster API's patch of the
		// node's annotations has landed (a failed patch is retried on a
		// later reconcile): seen at -parallel 4.
		framework.Eventually(ctx, t, 30*time.Second, "node "+node.Name+" annotated with machine "+m.Name, func(ctx context.Context) (bool, string, error) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			got := node.Annotations[capi.MachineAnnotation]
			return got == m.Name, fmt.Sprintf("annotated machine %q", got), nil
		})
		waitNodeReady(ctx, t, c, m.NodeName)
		slices := nodeSlices(ctx, t, c, m.NodeName)
		if len(slices) != 1 || len(slices[0].Spec.Devices) != 2 || slices[0].Spec.Pool.ResourceSliceCount != 1 ||
			slices[0].Spec.Pool.Name != m.NodeName || slices[0].Spec.Driver != capiGPUDriver {
			t.Errorf("node %s slices %+v, want one slice of pool %s with gpu-0 and gpu-1", m.NodeName, slices, m.NodeName)
		}
	}

	// Scale down with a mark on the oldest Machine: it goes, the newest stays.
	victim, keep := oldest, machines[0]
	if keep.Name == victim.Name {
		keep = machines[1]
	}
	env.Annotate(ctx, t, machineObj(ns, victim.Name), map[string]*string{capi.DeleteMachineAnnotation: ptr.To("smoke")})
	env.Scale(ctx, t, md, 1)
	env.WaitMachines(ctx, t, 90*time.Second, ns, "gpu", "only "+keep.Name+" left", func(ms []capi.Machine) bool {
		return len(ms) == 1 && ms[0].Name == keep.Name && ms[0].Phase == "Running"
	})
	framework.Eventually(ctx, t, 30*time.Second, "node "+victim.NodeName+" and its slices gone", func(ctx context.Context) (bool, string, error) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, victim.NodeName, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, "", err
		}
		n := len(nodeSlices(ctx, t, c, victim.NodeName))
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("node get: %v, %d slices", err, n), nil
	})
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, keep.NodeName, metav1.GetOptions{}); err != nil {
		t.Errorf("node %s of the kept machine: %v", keep.NodeName, err)
	}
}

// TestCAPIFaults: each fault knob of the dev infrastructure gives the
// Machine state a real provider's failure would.
func TestCAPIFaults(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	env := c.CAPI(t)
	// The cases are parallel subtests, which wait for a free slot (-parallel,
	// 3 in make test) after this function returns: the namespace's context must
	// outlast that wait, not only their own run.
	ctx, ns := c.NamespaceWithin(t, 15*time.Minute)
	env.NewCluster(ctx, t, ns, "c1")
	type check func(t *testing.T, m capi.Machine, created time.Time)
	cases := []struct {
		name  string
		knobs map[string]string
		// done: the Machine reached the state the fault must give.
		done func(m capi.Machine) bool
		// then: what must hold once done (and keep holding, for hold).
		then check
		hold bool
	}{{
		name:  "never-provisions",
		knobs: map[string]string{infra.FaultAnnotation: string(infra.NeverProvision)},
		// Phase set: Cluster API has reconciled the Machine at least once.
		done: func(m capi.Machine) bool { return m.Phase != "" && m.InfraReadyStatus == "False" },
		then: func(t *testing.T, m capi.Machine, _ time.Time) {
			if m.Phase != "Pending" || m.ProviderID != "" || m.NodeName != "" {
				t.Errorf("machine %s: %s, want Pending without providerID or node", m.Name, capi.Summary([]capi.Machine{m}))
			}
		},
		hold: true,
	}, {
		name:  "out-of-capacity",
		knobs: map[string]string{infra.FaultAnnotation: string(infra.OutOfCapacity)},
		done: func(m capi.Machine) bool {
			return m.FailureReason != "" && m.InfraReadyReason == infra.ReasonOutOfCapacity
		},
		then: func(t *testing.T, m capi.Machine, _ time.Time) {
			if m.FailureReason != infra.FailureReasonInsufficientCapacity || !strings.Contains(m.FailureMessage, "out of capacity") ||
				!strings.Contains(m.InfraReadyMessage, "out of capacity") || m.NodeName != "" {
				t.Errorf("machine %s: failure %q %q, infraReady %q %q, node %q", m.Name, m.FailureReason, m.FailureMessage,
					m.InfraReadyReason, m.InfraReadyMessage, m.NodeName)
			}
		},
		hold: true,
	}, {
		name:  "never-ready",
		knobs: map[string]string{infra.FaultAnnotation: string(infra.NeverReady)},
		done:  func(m capi.Machine) bool { return m.NodeName != "" },
		then: func(t *testing.T, m capi.Machine, _ time.Time) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if nodeReady(node) {
				t.Errorf("node %s of a NeverReady machine is Ready", node.Name)
			}
		},
		hold: true,
	}, {
		name:  "slow-boot",
		knobs: map[string]string{infra.BootDelayAnnotation: "5s"},
		done:  func(m capi.Machine) bool { return m.Phase == "Running" && m.NodeName != "" },
		then: func(t *testing.T, m capi.Machine, created time.Time) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if boot := node.CreationTimestamp.Sub(created); boot < 4*time.Second {
				t.Errorf("node %s came %s after its machine, want the 5s boot delay", node.Name, boot)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmpl := capi.MachineTemplate(ns, tc.name, gpuMachine(tc.name))
			tmpl.SetAnnotations(tc.knobs)
			md := capi.MachineDeployment(ns, "c1", tc.name, tc.name, capi.Replicas(1))
			env.Create(ctx, t, tmpl, md)
			ms := env.WaitMachines(ctx, t, 90*time.Second, ns, tc.name, tc.name+" machine state", func(ms []capi.Machine) bool {
				return len(ms) == 1 && tc.done(ms[0])
			})
			_, objs, err := env.Machines(ctx, ns, tc.name)
			if err != nil || len(objs) != 1 {
				t.Fatalf("machines of %s: %d, %v", tc.name, len(objs), err)
			}
			created := objs[0].GetCreationTimestamp().Time
			tc.then(t, ms[0], created)
			if !tc.hold {
				return
			}
			// The fault is not a moment: it still holds a while later.
			time.Sleep(3 * time.Second)
			ms, _, err = env.Machines(ctx, ns, tc.name)
			if err != nil || len(ms) != 1 {
				t.Fatalf("machines of %s: %v, %v", tc.name, capi.Summary(ms), err)
			}
			tc.then(t, ms[0], created)
			if tc.name == "never-provisions" {
				// Pending machines re-read their template: capacity that
				// arrives late boots them.
				env.Annotate(ctx, t, tmpl, map[string]*string{infra.FaultAnnotation: nil})
				env.WaitMachines(ctx, t, 90*time.Second, ns, tc.name, "the machine booting once the fault is cleared", framework.RunningWithNodes(1))
			}
		})
	}
}

// TestCAPIMachinePoolAndSet: a MachinePool gets one Node per replica
// through its DevMachinePool, and a MachineSet without a MachineDeployment
// makes Machines too.
func TestCAPIMachinePoolAndSet(t *testing.T) {
	t.Parallel()
	c := framework.Get(t)
	env := c.CAPI(t)
	ctx, ns := c.Namespace(t)
	env.NewCluster(ctx, t, ns, "c1")
	pool := capi.DevMachinePool(ns, "pool", gpuMachine("pool"))
	mp := capi.MachinePool(ns, "c1", "pool", "pool", capi.Replicas(2))
	env.Create(ctx, t, pool, mp)
	waitPoolNodes(ctx, t, env, ns, "pool", 2)
	env.Scale(ctx, t, mp, 1)
	waitPoolNodes(ctx, t, env, ns, "pool", 1)

	tmpl := capi.MachineTemplate(ns, "cpu", infra.MachineSpec{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}})
	ms := capi.MachineSet(ns, "c1", "cpu", "cpu", capi.Replicas(1))
	env.Create(ctx, t, tmpl, ms)
	framework.Eventually(ctx, t, 90*time.Second, "MachineSet cpu: 1 Running machine", func(ctx context.Context) (bool, string, error) {
		list, err := env.Dynamic.Resource(capi.MachineResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: capi.SetNameLabel + "=cpu"})
		if err != nil {
			return false, "", err
		}
		got := capi.Machines(list.Items)
		return framework.RunningWithNodes(1)(got), capi.Summary(got), nil
	})
}

// waitPoolNodes waits until the MachinePool lists n providerIDs and Cluster
// API has matched n Ready Nodes (status.nodeRefs), and the Nodes of the
// removed replicas are gone.
func waitPoolNodes(ctx context.Context, t *testing.T, env *framework.CAPI, ns, name string, n int) {
	t.Helper()
	framework.Eventually(ctx, t, 90*time.Second, fmt.Sprintf("MachinePool %s with %d nodes", name, n), func(ctx context.Context) (bool, string, error) {
		mp, err := env.Dynamic.Resource(capi.MachinePoolResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ids, _, _ := unstructured.NestedStringSlice(mp.Object, "spec", "providerIDList")
		refs, _, _ := unstructured.NestedSlice(mp.Object, "status", "nodeRefs")
		ready, _, _ := unstructured.NestedInt64(mp.Object, "status", "readyReplicas")
		pool, err := env.Dynamic.Resource(infra.MachinePoolResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		nodes, err := framework.Get(t).Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: infra.OwnerLabel + "=" + string(pool.GetUID())})
		if err != nil {
			return false, "", err
		}
		seen := fmt.Sprintf("providerIDs %v, nodeRefs %d, readyReplicas %d, nodes %d", ids, len(refs), ready, len(nodes.Items))
		return len(ids) == n && len(refs) == n && ready == int64(n) && len(nodes.Items) == n, seen, nil
	})
}

func machineObj(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(capi.Group + "/" + capi.Version)
	u.SetKind("Machine")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitNodeReady(ctx context.Context, t *testing.T, c *framework.Cluster, name string) {
	t.Helper()
	framework.Eventually(ctx, t, 30*time.Second, "node "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return nodeReady(n), fmt.Sprintf("conditions %v", n.Status.Conditions), nil
	})
}

func nodeSlices(ctx context.Context, t *testing.T, c *framework.Cluster, node string) []resourceapi.ResourceSlice {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: infra.NodeLabel + "=" + node})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
