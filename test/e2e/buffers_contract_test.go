package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The CapacityBuffer contract as Kueue's CapacityBuffer admission check
// (KEP-5133) uses it. No Kueue release serves that check yet, so these
// tests act as the KEP describes its controller: a PodTemplate and a
// buffer per PodSet, then the buffer's conditions read as an
// AdmissionCheck state.

// AdmissionCheck states, as KEP-5133 maps the buffer's conditions.
const (
	checkReady    = "Ready"
	checkPending  = "Pending"
	checkRejected = "Rejected"
)

// kueueCheck is the AdmissionCheck state KEP-5133 gives a buffer:
// Ready on Provisioning=True/FitsExistingCapacity, Rejected when the
// buffer cannot be resolved or is Infeasible (milestone 2), else Pending.
func kueueCheck(b *v1beta1.CapacityBuffer) string {
	ready := apimeta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionReadyForProvisioning)
	prov := apimeta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionProvisioning)
	switch {
	case ready != nil && ready.Status == metav1.ConditionFalse:
		return checkRejected
	case prov == nil:
		return checkPending
	case prov.Status == metav1.ConditionTrue && prov.Reason == buffers.ReasonFitsExisting:
		return checkReady
	case prov.Status == metav1.ConditionFalse && prov.Reason == buffers.ReasonInfeasible:
		return checkRejected
	}
	return checkPending
}

// kueueBuffer creates what the KEP's controller creates for one PodSet of
// a workload: the PodSet's pod template and a buffer of count of its
// pods, of the default (active-capacity) strategy. It returns the
// buffer's name.
func (s *bufferScenario) kueueBuffer(t *testing.T, workload, podSet string, pod *corev1.Pod, count int32) string {
	t.Helper()
	name := workload + "-" + podSet
	s.c.Create(s.ctx, t, &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
		Labels: map[string]string{"kueue.x-k8s.io/workload": workload}},
		Template: corev1.PodTemplateSpec{Spec: pod.Spec}})
	b := &v1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{"kueue.x-k8s.io/workload": workload}},
		Spec:       v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: name}, Replicas: ptr.To(count)}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.buffers.Create(s.ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// seenStatus is one status of a buffer as a watch saw it.
type seenStatus struct {
	reason string // Provisioning's
	ready  int32  // readyReplicas, -1 unset
	msg    string
}

// statusLog records every status the buffer name is written with, from
// before it exists: a state that lasts one pass is seen, as a polling
// test could miss it.
type statusLog struct {
	mu   sync.Mutex
	seen []seenStatus
}

func (s *bufferScenario) watchStatus(t *testing.T, name string) *statusLog {
	t.Helper()
	list, err := s.buffers.List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = "metadata.name=" + name
		return s.buffers.Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(s.ctx, list.GetResourceVersion(), lw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &statusLog{}
	go func() {
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			b, err := v1beta1.FromUnstructured(u)
			if err != nil {
				continue
			}
			c := apimeta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionProvisioning)
			if c == nil {
				continue
			}
			l.mu.Lock()
			st := seenStatus{reason: c.Reason, ready: ptr.Deref(b.Status.ReadyReplicas, -1), msg: c.Message}
			if n := len(l.seen); n == 0 || l.seen[n-1].reason != st.reason || l.seen[n-1].ready != st.ready {
				l.seen = append(l.seen, st)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *statusLog) get() []seenStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenStatus(nil), l.seen...)
}

func (l *statusLog) String() string {
	var parts []string
	for _, s := range l.get() {
		parts = append(parts, fmt.Sprintf("%s(ready=%d)", s.reason, s.ready))
	}
	return strings.Join(parts, " -> ")
}

// A Kueue-shaped buffer whose pods fit what exists is admitted at once:
// FitsExistingCapacity, every pod ready, and no node added for it.
func TestCapacityBufferContractFitsExistingCapacity(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 3)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	// A real pod brings a node with room for two more 1-CPU pods.
	s.c.Create(s.ctx, t, s.pod("real").CPU("2").Obj())
	s.waitOnGroup(t, "real", g.Name)
	s.waitNodes(t, g, 1, time.Minute)

	log := s.watchStatus(t, "job-a-main")
	name := s.kueueBuffer(t, "job-a", "main", s.pod("x").CPU("1").Obj(), 2)
	b := s.waitBuffer(t, name, "FitsExistingCapacity, 2 ready", time.Minute, holding(2, buffers.ReasonFitsExisting))
	if got := kueueCheck(b); got != checkReady {
		t.Errorf("admission check %s, want %s", got, checkReady)
	}
	s.stayNodes(t, g, 1, 4*time.Second)
	for _, st := range log.get() {
		if st.reason != buffers.ReasonFitsExisting {
			t.Errorf("statuses %s: want FitsExistingCapacity only, the buffer was never short of capacity", log)
			break
		}
	}
	if msgs, err := eventMessages(s.ctx, s.c, s.ns, name, buffers.EventTriggeredScaleUp); err != nil || len(msgs) != 0 {
		t.Errorf("TriggeredScaleUp events %q (%v) for a buffer that fits", msgs, err)
	}
}

// A Kueue-shaped buffer that needs nodes: RequiresNewCapacity (the check
// pending) while they come, naming the scale-up, then
// FitsExistingCapacity once they are there, readyReplicas rising to every
// pod once the nodes are Ready. Its nodes boot for 3 s, so the pass that
// finds them coming is seen too.
func TestCapacityBufferContractRequiresNewCapacityThenFits(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 4)
	g.BootDelay.Duration = 3 * time.Second
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})

	log := s.watchStatus(t, "job-b-workers")
	name := s.kueueBuffer(t, "job-b", "workers", s.pod("x").CPU("3").Obj(), 2)
	b := s.waitBuffer(t, name, "RequiresNewCapacity or later", time.Minute, condition(v1beta1.ConditionProvisioning, "", ""))
	first := apimeta.FindStatusCondition(b.Status.Conditions, v1beta1.ConditionProvisioning)
	t.Logf("first read: %s: %s", first.Reason, first.Message)
	b = s.waitBuffer(t, name, "FitsExistingCapacity, 2 ready", 2*time.Minute, holding(2, buffers.ReasonFitsExisting))
	if got := kueueCheck(b); got != checkReady {
		t.Errorf("admission check %s, want %s", got, checkReady)
	}
	s.waitNodes(t, g, 2, time.Minute)
	s.stayNodes(t, g, 2, 4*time.Second)

	seen := log.get()
	t.Logf("statuses: %s", log)
	if len(seen) == 0 || seen[0].reason != buffers.ReasonRequiresNew || seen[0].ready != 0 || !strings.Contains(seen[0].msg, g.Name+" +2") {
		t.Fatalf("statuses %s: want RequiresNewCapacity with 0 ready, naming the scale-up of %s +2, first (%+v)", log, g.Name, seen)
	}
	if got := kueueCheck(&v1beta1.CapacityBuffer{Status: v1beta1.CapacityBufferStatus{Conditions: []metav1.Condition{{
		Type: v1beta1.ConditionProvisioning, Status: metav1.ConditionFalse, Reason: seen[0].reason}}}}); got != checkPending {
		t.Errorf("admission check %s while nodes come, want %s", got, checkPending)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].ready < seen[i-1].ready {
			t.Errorf("statuses %s: readyReplicas fell", log)
		}
	}
	if msgs, err := eventMessages(s.ctx, s.c, s.ns, name, buffers.EventTriggeredScaleUp); err != nil || len(msgs) == 0 {
		t.Errorf("no TriggeredScaleUp event on the buffer (%v)", err)
	}
}

// A pod no node group's template can hold: Infeasible, naming why, the
// check rejected (the KEP's milestone 2), no node added.
func TestCapacityBufferContractInfeasible(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 3)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	name := s.kueueBuffer(t, "job-c", "huge", s.pod("x").CPU("100").Obj(), 1)
	b := s.waitBuffer(t, name, "Infeasible", time.Minute, condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonInfeasible))
	msg := conditionMessage(b, v1beta1.ConditionProvisioning)
	if !containsAll(msg, g.Name, "NodeResourcesFit", "cpu") {
		t.Errorf("Infeasible message %q does not say which group's template rejects the pod, and why", msg)
	}
	t.Logf("Infeasible: %s", msg)
	if got := kueueCheck(b); got != checkRejected {
		t.Errorf("admission check %s, want %s", got, checkRejected)
	}
	if !condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionTrue, "")(b) || ptr.Deref(b.Status.ReadyReplicas, -1) != 0 {
		t.Errorf("status %+v: want ReadyForProvisioning=True and 0 ready replicas", b.Status)
	}
	s.stayNodes(t, g, 0, 3*time.Second)
	framework.Eventually(s.ctx, t, 30*time.Second, "a NotTriggerScaleUp event", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventMessages(ctx, s.c, s.ns, name, buffers.EventNotTriggerScaleUp)
		return len(msgs) > 0, fmt.Sprintf("%q", msgs), err
	})
}

// A scalableRef to a ReplicationController, a kind the autoscaler has no
// informer for, resolves through its scale subresource as upstream's: the
// buffer is 50% of its replicas of its pod template, and follows it when
// it is scaled through /scale.
func TestCapacityBufferScalableReplicationController(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 4)
	labels := map[string]string{"app": "rc-web"}
	pod := s.pod("x").CPU("1").Obj()
	rcs := s.c.Client.CoreV1().ReplicationControllers(s.ns)
	if _, err := rcs.Create(s.ctx, &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"},
		Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2), Selector: labels,
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: rc-headroom}
spec:
  scalableRef: {kind: ReplicationController, name: web}
  percentage: 50`)
	b := s.waitBuffer(t, "rc-headroom", "1 pod held", 2*time.Minute, holding(1, buffers.ReasonFitsExisting))
	if msg := conditionMessage(b, v1beta1.ConditionReadyForProvisioning); !strings.Contains(msg, "ReplicationController web") {
		t.Errorf("ReadyForProvisioning message %q does not name the ReplicationController", msg)
	}
	framework.Eventually(s.ctx, t, time.Minute, "the ReplicationController's 2 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})

	// Scaled as an HPA scales it: through the scale subresource.
	if _, err := rcs.UpdateScale(s.ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "web"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 4}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitBuffer(t, "rc-headroom", "2 pods held", 2*time.Minute, holding(2, buffers.ReasonFitsExisting))
	framework.Eventually(s.ctx, t, time.Minute, "the ReplicationController's 4 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 4, seen, err
	})
}

// A scalableRef to a kind the API server does not serve is refused with
// a reason, never a crash, and holds nothing.
func TestCapacityBufferScalableUnknownKind(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 2)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: gadgets}
spec:
  scalableRef: {apiGroup: example.com, kind: Gadget, name: g}
  replicas: 1`)
	b := s.waitBuffer(t, "gadgets", "ScalableRefNotSupported", time.Minute,
		condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, buffers.ReasonScalableNotSupported))
	if msg := conditionMessage(b, v1beta1.ConditionReadyForProvisioning); !strings.Contains(msg, "serves no such kind") {
		t.Errorf("ReadyForProvisioning message %q does not say why", msg)
	}
	s.stayNodes(t, g, 0, 3*time.Second)
}

// A buffer with only limits is accepted, as upstream's schema accepts it,
// and means what upstream makes of it: with no pod template named it
// holds nothing and says why; once a controller names one in
// status.podTemplateRef (upstream's split of translation and
// provisioning), as many of its pods as fit the limits.
func TestCapacityBufferLimitsOnly(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 2)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: cpu-pool}
spec:
  limits: {cpu: "3"}`)
	b := s.waitBuffer(t, "cpu-pool", "no pod template", time.Minute,
		condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, buffers.ReasonNoPodTemplate))
	if !condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonNotReady)(b) || b.Status.Replicas != nil {
		t.Errorf("status %+v: want Provisioning=False/NotReadyForProvisioning and no replicas", b.Status)
	}
	s.stayNodes(t, g, 0, 3*time.Second)

	s.podTemplate(t, "one-cpu", s.pod("x").CPU("1").Obj())
	patch := []byte(`{"status":{"podTemplateRef":{"name":"one-cpu"}}}`)
	if _, err := s.buffers.Patch(s.ctx, "cpu-pool", types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	b = s.waitBuffer(t, "cpu-pool", "3 pods held", time.Minute, holding(3, buffers.ReasonFitsExisting))
	if b.Status.PodTemplateRef == nil || b.Status.PodTemplateRef.Name != "one-cpu" {
		t.Errorf("status.podTemplateRef %v, want the controller's one-cpu kept", b.Status.PodTemplateRef)
	}
	s.waitNodes(t, g, 1, time.Minute)
	s.stayNodes(t, g, 1, 3*time.Second)
}

// A scalableRef to a custom kind with a scale subresource and no pod
// template: the shape is the newest pod its /scale selector matches, as
// upstream takes it; before the workload has a pod the buffer says so.
func TestCapacityBufferScalableCustomKind(t *testing.T) {
	s := newBufferScenario(t)
	s.c.InstallCRD(s.ctx, t, "test/e2e/testdata/widgets-crd.yaml")
	g := s.cpuGroup("cpu4", 3)
	widgets := s.dyn.Resource(schema.GroupVersionResource{Group: "e2e.dra-autoscaler.io", Version: "v1", Resource: "widgets"}).Namespace(s.ns)
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "e2e.dra-autoscaler.io/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": s.ns}, "spec": map[string]any{"replicas": int64(2)}}}
	if _, err := widgets.Create(s.ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The widget's controller, as the test plays it, reports its replicas
	// and selector.
	status := []byte(`{"status":{"replicas":2,"selector":"app=widget"}}`)
	if _, err := widgets.Patch(s.ctx, "w", types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: widget-headroom}
spec:
  scalableRef: {apiGroup: e2e.dra-autoscaler.io, kind: Widget, name: w}
  percentage: 50`)
	b := s.waitBuffer(t, "widget-headroom", "no pod yet", time.Minute,
		condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, buffers.ReasonScalableNoPods))
	t.Logf("before the widget's first pod: %s", conditionMessage(b, v1beta1.ConditionReadyForProvisioning))
	s.stayNodes(t, g, 0, 3*time.Second)

	s.c.Create(s.ctx, t, s.pod("widget-0").CPU("1500m").Label("app", "widget").Obj())
	b = s.waitBuffer(t, "widget-headroom", "1 pod of the widget's shape held", 2*time.Minute, holding(1, buffers.ReasonFitsExisting))
	if msg := conditionMessage(b, v1beta1.ConditionReadyForProvisioning); !strings.Contains(msg, "Widget w") {
		t.Errorf("ReadyForProvisioning message %q does not name the widget", msg)
	}
	s.waitOnGroup(t, "widget-0", g.Name)
	// 1.5 CPUs twice on a 4-CPU node: the pod and its buffer share one.
	s.waitNodes(t, g, 1, time.Minute)
	s.stayNodes(t, g, 1, 3*time.Second)
}
