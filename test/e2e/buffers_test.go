package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The CapacityBuffer tests are serial (no t.Parallel), as the
// ProvisioningRequest ones: every autoscaler of this binary serves every
// buffer in the cluster and writes its status.

const bufferCRD = "deploy/crds/autoscaling.x-k8s.io_capacitybuffers.yaml"

type bufferScenario struct {
	*scenario
	dyn     dynamic.Interface
	buffers dynamic.ResourceInterface
}

func newBufferScenario(t *testing.T) *bufferScenario {
	s := newScenario(t)
	s.c.InstallCRD(s.ctx, t, bufferCRD)
	dyn, err := dynamic.NewForConfig(s.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &bufferScenario{scenario: s, dyn: dyn, buffers: dyn.Resource(v1beta1.Resource).Namespace(s.ns)}
}

// apply creates the objects of a YAML text (documents split by ---), as
// a user's `kubectl apply -f` would: buffers through the dynamic client,
// so nothing of ours shapes them.
func (s *bufferScenario) apply(t *testing.T, text string) {
	t.Helper()
	for _, doc := range strings.Split(text, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%v in:\n%s", err, doc)
		}
		u.SetNamespace(s.ns)
		// Through the endpoint of the object's own version (v1alpha1 is
		// served too).
		gvr := u.GroupVersionKind().GroupVersion().WithResource(v1beta1.Resource.Resource)
		if _, err := s.dyn.Resource(gvr).Namespace(s.ns).Create(s.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", u.GetName(), err)
		}
	}
}

// podTemplate stores the pod's spec as a PodTemplate.
func (s *bufferScenario) podTemplate(t *testing.T, name string, pod *corev1.Pod) {
	s.c.Create(s.ctx, t, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Template: corev1.PodTemplateSpec{Spec: pod.Spec}})
}

// waitBuffer waits until the buffer's status satisfies ok.
func (s *bufferScenario) waitBuffer(t *testing.T, name, what string, timeout time.Duration, ok func(*v1beta1.CapacityBuffer) bool) *v1beta1.CapacityBuffer {
	t.Helper()
	var got *v1beta1.CapacityBuffer
	framework.Eventually(s.ctx, t, timeout, name+": "+what, func(ctx context.Context) (bool, string, error) {
		u, err := s.buffers.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if got, err = v1beta1.FromUnstructured(u); err != nil {
			return false, "", err
		}
		return ok(got), fmt.Sprintf("replicas=%v readyReplicas=%v conditions=%+v", ptr.Deref(got.Status.Replicas, -1),
			ptr.Deref(got.Status.ReadyReplicas, -1), got.Status.Conditions), nil
	})
	return got
}

// condition says the buffer has the condition typ with status and reason
// ("": any).
func condition(typ string, status metav1.ConditionStatus, reason string) func(*v1beta1.CapacityBuffer) bool {
	return func(b *v1beta1.CapacityBuffer) bool {
		c := apimeta.FindStatusCondition(b.Status.Conditions, typ)
		return c != nil && (status == "" || c.Status == status) && (reason == "" || c.Reason == reason)
	}
}

// holding says the buffer holds replicas pods, all on nodes Ready now
// (readyReplicas), with Provisioning=True and reason.
func holding(replicas int32, reason string) func(*v1beta1.CapacityBuffer) bool {
	return func(b *v1beta1.CapacityBuffer) bool {
		return ptr.Deref(b.Status.Replicas, -1) == replicas && ptr.Deref(b.Status.ReadyReplicas, -1) == replicas &&
			condition(v1beta1.ConditionProvisioning, metav1.ConditionTrue, reason)(b)
	}
}

// twoGPUGroup has nodes of 2 GPUs (no NICs: one slice per node).
func (s *bufferScenario) twoGPUGroup(max int) kwok.NodeGroupConfig {
	g := s.gpuGroup("gpu2", max, 2)
	g.Template.Drivers = g.Template.Drivers[:1]
	return g
}

func (s *bufferScenario) waitNodes(t *testing.T, g kwok.NodeGroupConfig, n int, timeout time.Duration) {
	t.Helper()
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("%d node(s) in %s", n, g.Name), func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(nodes) == n, fmt.Sprintf("%d nodes", len(nodes)), err
	})
}

func (s *bufferScenario) stayNodes(t *testing.T, g kwok.NodeGroupConfig, n int, d time.Duration) {
	t.Helper()
	framework.Consistently(s.ctx, t, d, fmt.Sprintf("%d node(s) in %s", n, g.Name), func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(nodes) == n, fmt.Sprintf("%d nodes", len(nodes)), err
	})
}

// A buffer of 2 one-GPU pods keeps 2 GPUs free: one 2-GPU node for it;
// a real GPU pod that arrives binds there at once, no node added for it;
// then the buffer refills with a second node, and no third comes. The
// buffer is written as upstream's documentation writes one, as YAML text.
func TestCapacityBufferKeepsGPUsFree(t *testing.T) {
	s := newBufferScenario(t)
	g := s.twoGPUGroup(4)
	tmpl := s.gpuTemplate(t)
	s.podTemplate(t, "one-gpu", s.gpuPod("x", tmpl, ""))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: warm-gpus
spec:
  provisioningStrategy: "buffer.x-k8s.io/active-capacity"
  podTemplateRef:
    name: one-gpu
  replicas: 2`)
	s.waitBuffer(t, "warm-gpus", "2 pods resolved", time.Minute, func(b *v1beta1.CapacityBuffer) bool {
		return ptr.Deref(b.Status.Replicas, -1) == 2 && condition(v1beta1.ConditionProvisioning, "", "")(b)
	})
	s.waitNodes(t, g, 1, time.Minute)
	b := s.waitBuffer(t, "warm-gpus", "2 pods held on the node", time.Minute, holding(2, buffers.ReasonFitsExisting))
	if b.Status.PodTemplateRef == nil || b.Status.PodTemplateRef.Name != "one-gpu" || ptr.Deref(b.Status.ProvisioningStrategy, "") != v1beta1.ActiveCapacity {
		t.Errorf("status %+v does not name the template and strategy", b.Status)
	}
	s.stayNodes(t, g, 1, 3*time.Second)
	nodes, _ := s.groupNodes(s.ctx, g.Name)
	first := nodes[0].Name

	start := time.Now()
	s.c.Create(s.ctx, t, s.gpuPod("real", tmpl, ""))
	s.waitOnGroup(t, "real", g.Name)
	node, _, _ := s.nodeOf(s.ctx, "real")
	if node != first {
		t.Errorf("the real pod went to %s, not to the buffered node %s", node, first)
	}
	t.Logf("the real pod bound %s after it was created", time.Since(start).Round(time.Millisecond))

	s.waitNodes(t, g, 2, time.Minute)
	s.waitBuffer(t, "warm-gpus", "refilled on a second node", time.Minute, holding(2, buffers.ReasonFitsExisting))
	s.stayNodes(t, g, 2, 4*time.Second)
	if msgs, err := eventMessages(s.ctx, s.c, s.ns, "warm-gpus", buffers.EventTriggeredScaleUp); err != nil || len(msgs) == 0 {
		t.Errorf("no TriggeredScaleUp event on the buffer (%v)", err)
	}
}

// The same buffer with a device-class quota of 1 GPU in the namespace:
// LimitedByQuotas, 1 pod held, and the node it needs is the only one.
func TestCapacityBufferLimitedByQuota(t *testing.T) {
	s := newBufferScenario(t)
	g := s.twoGPUGroup(4)
	tmpl := s.gpuTemplate(t)
	s.podTemplate(t, "one-gpu", s.gpuPod("x", tmpl, ""))
	s.c.Create(s.ctx, t, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceName(s.ns + "-gpu.deviceclass.resource.k8s.io/devices"): resource.MustParse("1")}}})
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: warm-gpus}
spec:
  podTemplateRef: {name: one-gpu}
  replicas: 3`)
	b := s.waitBuffer(t, "warm-gpus", "LimitedByQuotas", time.Minute, condition(v1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, buffers.ReasonQuotasAllocated))
	if ptr.Deref(b.Status.Replicas, -1) != 1 {
		t.Errorf("status.replicas %v, want 1", ptr.Deref(b.Status.Replicas, -1))
	}
	if c := apimeta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionLimitedByQuotas); !strings.Contains(c.Message, "gpus:") {
		t.Errorf("LimitedByQuotas %q does not name the quota", c.Message)
	}
	s.waitNodes(t, g, 1, time.Minute)
	s.waitBuffer(t, "warm-gpus", "1 pod held", time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.stayNodes(t, g, 1, 3*time.Second)
}

// A buffer of 50% of a Deployment follows its replicas: 2 replicas, 1
// buffer pod; scaled to 4, 2 buffer pods. 2-CPU pods on 4-CPU nodes: 2
// nodes, then 3. The buffer is written in upstream's first version,
// v1alpha1 (the one Karpenter's design shows), still served.
func TestCapacityBufferFollowsDeployment(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 6)
	pod := s.pod("x").CPU("2").Obj()
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}}
	s.c.Create(s.ctx, t, dep)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1alpha1
kind: CapacityBuffer
metadata: {name: web-headroom}
spec:
  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  percentage: 50`)
	s.waitBuffer(t, "web-headroom", "1 pod held", 2*time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.waitNodes(t, g, 2, time.Minute)
	framework.Eventually(s.ctx, t, time.Minute, "the Deployment's 2 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})

	d, err := s.c.Client.AppsV1().Deployments(s.ns).Get(s.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Replicas = ptr.To[int32](4)
	if _, err := s.c.Client.AppsV1().Deployments(s.ns).Update(s.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitBuffer(t, "web-headroom", "2 pods held", 2*time.Minute, holding(2, buffers.ReasonFitsExisting))
	s.waitNodes(t, g, 3, time.Minute)
	framework.Eventually(s.ctx, t, time.Minute, "the Deployment's 4 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 4, seen, err
	})
	s.stayNodes(t, g, 3, 3*time.Second)
}

// Scale-down keeps exactly the buffered capacity: 3 buffered GPUs hold 2
// two-GPU nodes, empty as far as real pods go, well past
// --scale-down-unneeded-time; cut to 1 GPU, one node goes; the buffer
// deleted, the last one goes too.
func TestCapacityBufferKeepsItsNodesFromScaleDown(t *testing.T) {
	s := newBufferScenario(t)
	g := s.twoGPUGroup(4)
	tmpl := s.gpuTemplate(t)
	s.podTemplate(t, "one-gpu", s.gpuPod("x", tmpl, ""))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: warm-gpus}
spec:
  podTemplateRef: {name: one-gpu}
  replicas: 3`)
	s.waitNodes(t, g, 2, time.Minute)
	s.waitBuffer(t, "warm-gpus", "3 pods held", time.Minute, holding(3, buffers.ReasonFitsExisting))
	s.stayNodes(t, g, 2, 8*time.Second)

	patch := []byte(`{"spec":{"replicas":1}}`)
	if _, err := s.buffers.Patch(s.ctx, "warm-gpus", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitNodes(t, g, 1, time.Minute)
	s.waitBuffer(t, "warm-gpus", "1 pod held", time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.stayNodes(t, g, 1, 6*time.Second)

	if err := s.buffers.Delete(s.ctx, "warm-gpus", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitNodes(t, g, 0, time.Minute)
}

// Beyond upstream: a buffer outside its active windows holds nothing (no
// node for it); its window widened to always, it holds its pod.
func TestCapacityBufferActiveWindows(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 2)
	s.podTemplate(t, "two-cpus", s.pod("x").CPU("2").Obj())
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	// 29 February, 03:17 UTC for a minute: outside it but for a minute
	// every four years.
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata:
  name: tidal
  annotations:
    autoscaling.dra-autoscaler.io/active-windows: "17 3 29 2 * for 1m"
spec:
  podTemplateRef: {name: two-cpus}
  replicas: 1`)
	b := s.waitBuffer(t, "tidal", "outside its windows", time.Minute,
		condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonOutsideWindows))
	if ptr.Deref(b.Status.Replicas, -1) != 0 {
		t.Errorf("status.replicas %v outside the windows, want 0", ptr.Deref(b.Status.Replicas, -1))
	}
	s.stayNodes(t, g, 0, 3*time.Second)

	patch := []byte(`{"metadata":{"annotations":{"autoscaling.dra-autoscaler.io/active-windows":"* * * * * for 2m"}}}`)
	if _, err := s.buffers.Patch(s.ctx, "tidal", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitNodes(t, g, 1, time.Minute)
	s.waitBuffer(t, "tidal", "1 pod held", time.Minute, holding(1, buffers.ReasonFitsExisting))
}
