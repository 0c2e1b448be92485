package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	provclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned/typed/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The ProvisioningRequest tests are serial (no t.Parallel): every
// autoscaler of this binary serves every request in the cluster, so two
// running side by side would both answer each other's requests. Serial
// tests never overlap the parallel ones either.

const provreqCRD = "deploy/crds/autoscaling.x-k8s.io_provisioningrequests.yaml"

type provScenario struct {
	*scenario
	requests provclient.ProvisioningRequestInterface
}

// newProvScenario installs the CRD (once per control plane) and a claim
// template "gpu" for one GPU of the test's driver.
func newProvScenario(t *testing.T) *provScenario {
	s := newScenario(t)
	s.c.InstallCRD(s.ctx, t, provreqCRD)
	client, err := versioned.NewForConfig(s.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	return &provScenario{scenario: s, requests: client.AutoscalingV1().ProvisioningRequests(s.ns)}
}

// gpuPod is a pod of the test claiming one GPU.
func (s *provScenario) gpuPod(name string) *corev1.Pod {
	return s.pod(name).CPU("1").ClaimFromTemplate("gpu", "gpu").Obj()
}

// kueueRequest makes a request the way Kueue v0.17's ProvisioningRequest
// admission check does: named <workload>-<check>-<attempt>, controlled by
// the Workload (a ConfigMap stands in: no Kueue CRDs here), then one
// PodTemplate per podSet, ppt-<request>-<podSet>, controlled by the
// request, created after it. withTemplate=false leaves the template out.
func (s *provScenario) kueueRequest(t *testing.T, workload, class string, count int32, withTemplate bool) string {
	t.Helper()
	wl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: workload}}
	wl, err := s.c.Client.CoreV1().ConfigMaps(s.ns).Create(s.ctx, wl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := workload + "-prov-check-1"
	tmplName := "ppt-" + name + "-main"
	pr := &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: wl.Name, UID: wl.UID, Controller: ptr.To(true)}}},
		Spec: v1.ProvisioningRequestSpec{
			ProvisioningClassName: class,
			PodSets:               []v1.PodSet{{PodTemplateRef: v1.Reference{Name: tmplName}, Count: count}},
		},
	}
	pr, err = s.requests.Create(s.ctx, pr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ProvisioningRequest %s: %v", name, err)
	}
	if !withTemplate {
		return name
	}
	pod := s.gpuPod("x")
	tmpl := &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: tmplName,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "ProvisioningRequest", Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/podset": "main"}}, Spec: pod.Spec},
	}
	if _, err := s.c.Client.CoreV1().PodTemplates(s.ns).Create(s.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PodTemplate %s: %v", tmplName, err)
	}
	return name
}

// waitCondition waits until the request has the condition with status and
// returns it.
func (s *provScenario) waitCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, timeout time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("%s %s=%s", name, typ, status), func(ctx context.Context) (bool, string, error) {
		pr, err := s.requests.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c := apimeta.FindStatusCondition(pr.Status.Conditions, typ)
		if c != nil {
			got = *c
		}
		return c != nil && c.Status == status, fmt.Sprintf("%+v", pr.Status.Conditions), nil
	})
	return got
}

// gpuNode creates a node with gpus GPUs of the test's driver, kept Ready
// by kwok; it belongs to no node group.
func (s *provScenario) gpuNode(t *testing.T, name string, gpus int) {
	node := framework.Kwok(builder.Node(s.ns+"-"+name).CPU("64").Memory("512Gi").Label(testLabel, s.ns).Obj())
	var devs []*builder.DeviceBuilder
	for i := range gpus {
		devs = append(devs, builder.Device(fmt.Sprintf("gpu-%d", i)))
	}
	s.c.Create(s.ctx, t, node, builder.ResourceSlice(node.Name+"-gpus", node.Name, s.gpu, node.Name).Devices(devs...).Obj())
}

func wantReason(t *testing.T, c metav1.Condition, reason, inMessage string) {
	t.Helper()
	if c.Reason != reason || !strings.Contains(c.Message, inMessage) {
		t.Errorf("%s=%s reason %q message %q, want reason %s and a message with %q", c.Type, c.Status, c.Reason, c.Message, reason, inMessage)
	}
}

// check-capacity answers from what exists and never scales: no capacity
// first, then a 2-GPU node: two 1-GPU requests fit and book it, a third
// does not; the GPU group stays empty throughout.
func TestProvReqCheckCapacity(t *testing.T) {
	s := newProvScenario(t)
	g := s.gpuGroup("gpu2", 4, 2)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	early := s.kueueRequest(t, "early", v1.ProvisioningClassCheckCapacity, 1, true)
	wantReason(t, s.waitCondition(t, early, v1.Provisioned, metav1.ConditionFalse, time.Minute), provreq.ReasonCapacityIsNotFound, "0 of 1 pod(s) fit")
	s.gpuNode(t, "n1", 2)
	wantReason(t, s.waitCondition(t, early, v1.Provisioned, metav1.ConditionTrue, time.Minute), provreq.ReasonCapacityIsFound, "")
	second := s.kueueRequest(t, "second", v1.ProvisioningClassCheckCapacity, 1, true)
	wantReason(t, s.waitCondition(t, second, v1.Provisioned, metav1.ConditionTrue, time.Minute), provreq.ReasonCapacityIsFound, "")
	third := s.kueueRequest(t, "third", v1.ProvisioningClassCheckCapacity, 1, true)
	wantReason(t, s.waitCondition(t, third, v1.Provisioned, metav1.ConditionFalse, time.Minute), provreq.ReasonCapacityIsNotFound, "0 of 1 pod(s) fit")
	s.waitCondition(t, third, v1.Accepted, metav1.ConditionTrue, time.Second)
	framework.Consistently(s.ctx, t, 3*time.Second, "check-capacity never scales up", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(nodes) == 0, fmt.Sprintf("%d nodes", len(nodes)), err
	})
}

// best-effort-atomic: 8 one-GPU pods on 2-GPU nodes are exactly 4 nodes in
// one atomic request; the consumers Kueue then creates (with the consume
// annotation) bind to them and nothing more is added.
func TestProvReqBestEffortAtomic(t *testing.T) {
	s := newProvScenario(t)
	g := s.gpuGroup("gpu2", 8, 2)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	name := s.kueueRequest(t, "train", v1.ProvisioningClassBestEffortAtomicScaleUp, 8, true)
	wantReason(t, s.waitCondition(t, name, v1.Provisioned, metav1.ConditionTrue, 2*time.Minute), provreq.ReasonCapacityIsProvisioned, g.Name+" +4")
	framework.Eventually(s.ctx, t, 30*time.Second, "an event of the +4 scale-up on the request", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, name, "TriggeredScaleUp")
		return len(msgs) > 0 && strings.Contains(msgs[0], g.Name+" +4"), fmt.Sprintf("%q", msgs), err
	})
	for i := range 8 {
		p := s.gpuPod(fmt.Sprintf("train-%d", i))
		p.Annotations = map[string]string{v1.ProvisioningRequestPodAnnotationKey: name, v1.ProvisioningClassPodAnnotationKey: v1.ProvisioningClassBestEffortAtomicScaleUp}
		s.c.Create(s.ctx, t, p)
	}
	framework.Eventually(s.ctx, t, 3*time.Minute, "all 8 consumers bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 8, seen, err
	})
	framework.Consistently(s.ctx, t, 4*time.Second, "exactly 4 nodes", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(nodes) == 4, fmt.Sprintf("%d nodes", len(nodes)), err
	})
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, g.Name+"-") {
			t.Errorf("%s on %q, not on a node of %s", p.Name, p.Spec.NodeName, g.Name)
		}
	}
	m, _ := a.Metrics(s.ctx)
	if !strings.Contains(m, fmt.Sprintf(`cluster_autoscaler_scaled_up_nodes_total{node_group=%q} 4`, g.Name)) {
		t.Error("scaled_up_nodes_total is not 4")
	}
}

// All or nothing: 10 one-GPU pods need 5 nodes, the group may grow to 4:
// no node at all, and Provisioned=False says why.
func TestProvReqAllOrNothing(t *testing.T) {
	s := newProvScenario(t)
	g := s.gpuGroup("gpu2", 4, 2)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	name := s.kueueRequest(t, "big", v1.ProvisioningClassBestEffortAtomicScaleUp, 10, true)
	wantReason(t, s.waitCondition(t, name, v1.Provisioned, metav1.ConditionFalse, time.Minute), provreq.ReasonCapacityIsNotFound, "minCount 10")
	framework.Consistently(s.ctx, t, 5*time.Second, "no node for part of the request", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(nodes) == 0, fmt.Sprintf("%d nodes", len(nodes)), err
	})
	if msgs, err := s.events(s.ctx, name, "NotTriggerScaleUp"); err != nil || len(msgs) == 0 {
		t.Errorf("no NotTriggerScaleUp event on the request (%v)", err)
	}
}

// Booking: a Provisioned request holds its capacity (a later request for
// it is refused) until the window, shortened here to 10s, ends with
// BookingExpired; then the later request gets it.
func TestProvReqBookingExpired(t *testing.T) {
	s := newProvScenario(t)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{s.gpuGroup("gpu2", 1, 2)}},
		"--provisioning-request-booking-duration=10s")
	s.gpuNode(t, "n1", 2)
	first := s.kueueRequest(t, "first", v1.ProvisioningClassCheckCapacity, 2, true)
	s.waitCondition(t, first, v1.Provisioned, metav1.ConditionTrue, time.Minute)
	later := s.kueueRequest(t, "later", v1.ProvisioningClassCheckCapacity, 2, true)
	wantReason(t, s.waitCondition(t, later, v1.Provisioned, metav1.ConditionFalse, 8*time.Second), provreq.ReasonCapacityIsNotFound, "")
	wantReason(t, s.waitCondition(t, first, v1.BookingExpired, metav1.ConditionTrue, 30*time.Second),
		provreq.ReasonCapacityReservationTimeExpired, provreq.MessageCapacityReservationExpired)
	wantReason(t, s.waitCondition(t, later, v1.Provisioned, metav1.ConditionTrue, 30*time.Second), provreq.ReasonCapacityIsFound, "")
}

// A request whose PodTemplate never comes is Failed, naming it, after a
// short grace; the valid request beside it is served all the same.
func TestProvReqMissingPodTemplate(t *testing.T) {
	s := newProvScenario(t)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{s.gpuGroup("gpu2", 1, 2)}})
	s.gpuNode(t, "n1", 2)
	broken := s.kueueRequest(t, "broken", v1.ProvisioningClassCheckCapacity, 1, false)
	good := s.kueueRequest(t, "good", v1.ProvisioningClassCheckCapacity, 1, true)
	wantReason(t, s.waitCondition(t, good, v1.Provisioned, metav1.ConditionTrue, time.Minute), provreq.ReasonCapacityIsFound, "")
	wantReason(t, s.waitCondition(t, broken, v1.Failed, metav1.ConditionTrue, time.Minute),
		provreq.ReasonFailedToCreatePods, "PodTemplate "+s.ns+"/ppt-"+broken+"-main not found")
}
