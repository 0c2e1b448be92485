package buffers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Reasons of ReadyForProvisioning=False when admission judged the
// buffer's pod.
const (
	// ReasonPodRejected: the API server's admission rejects a pod of the
	// buffer's template; the message is the API server's, naming the
	// policy, webhook or plugin.
	ReasonPodRejected = "PodRejectedByAdmission"
	// ReasonAdmissionUnknown: the dry run failed (the API server or a
	// webhook did not answer) and no earlier verdict stands.
	ReasonAdmissionUnknown = "AdmissionCheckFailed"
)

// AdmissionRecheck is how long a verdict stands before the buffer's pod
// is judged again, so that a policy added, changed or removed is seen
// within minutes, without a dry run every pass.
const AdmissionRecheck = 3 * time.Minute

// Admission creates a pod in dry run: nothing is stored, and the error is
// the API server's verdict (nil: admitted).
type Admission interface {
	DryRunCreate(ctx context.Context, pod *corev1.Pod) error
}

// DryRun is an Admission over a clientset (needs create on pods).
type DryRun struct {
	Client  kubernetes.Interface
	Timeout time.Duration // 0: 10s
}

// DryRunCreate creates the pod with dryRun=All: defaulting, mutating and
// validating admission (quota, LimitRanger, PodSecurity,
// ValidatingAdmissionPolicies, webhooks) judge it as a real pod.
func (d DryRun) DryRunCreate(ctx context.Context, pod *corev1.Pod) error {
	timeout := d.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := d.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "cluster-autoscaler"})
	return err
}

// admissions asks, and remembers, the API server's verdict on each
// buffer's pod.
type admissions struct {
	api     Admission
	verdict map[types.UID]verdict
}

type verdict struct {
	key    string    // buffer UID, generation and template version
	at     time.Time // when the API server was asked
	reject string    // "" admitted, else the API server's message
}

func newAdmissions(api Admission) *admissions {
	return &admissions{api: api, verdict: map[types.UID]verdict{}}
}

// check judges the buffer's pod: a rejected buffer is left not ready
// (ReasonPodRejected, the API server's message), one refused by quota
// alone holds nothing (AdmissionQuota). A verdict younger than
// AdmissionRecheck for the same buffer generation and template version
// is not asked again. When the dry run fails, the last verdict for the
// same key stands, whatever its age; without one, the buffer holds
// nothing this pass: nothing is held on a guess.
func (a *admissions) check(ctx context.Context, b *Buffer, now time.Time) {
	logger := klog.FromContext(ctx).WithValues("capacityBuffer", b.Key())
	key := fmt.Sprintf("%s/%d/%s", b.Obj.UID, b.Obj.Generation, b.TemplateVersion)
	v, known := a.verdict[b.Obj.UID]
	known = known && v.key == key
	if !known || now.Sub(v.at) >= AdmissionRecheck {
		err := a.api.DryRunCreate(ctx, admissionPod(b))
		switch kind := classify(err); kind {
		case admitted, rejected:
			v = verdict{key: key, at: now}
			if kind == rejected {
				v.reject = err.Error()
			}
			a.verdict[b.Obj.UID] = v
			known = true
			logger.V(2).Info("Capacity buffer pod judged by admission", "admitted", kind == admitted, "verdict", v.reject)
		case quotaExceeded:
			// Room, not policy: it changes as pods come and go, so it
			// is not remembered; the next pass asks again.
			b.AdmissionQuota = "the API server's quota admission: " + err.Error()
			return
		case namespaceGoing:
			// Nothing will run there again: the buffer holds nothing.
			logger.V(4).Info("Capacity buffer's namespace is being deleted; it holds nothing")
			b.NotReady, b.Message = ReasonAdmissionUnknown, "the buffer's namespace is being deleted"
			return
		default:
			logger.Info("Capacity buffer pod could not be judged by admission", "err", err, "earlierVerdict", known)
			if !known {
				b.NotReady, b.Message = ReasonAdmissionUnknown, "the API server could not judge a pod of the buffer's template in a dry run: "+err.Error()
				return
			}
		}
	}
	if v.reject != "" {
		b.NotReady, b.Message = ReasonPodRejected, "the API server's admission rejects a pod of the buffer's template: "+v.reject
	}
}

// forget drops the verdicts of buffers that are gone.
func (a *admissions) forget(seen map[types.UID]bool) {
	for uid := range a.verdict {
		if !seen[uid] {
			delete(a.verdict, uid)
		}
	}
}

type verdictKind int

const (
	admitted verdictKind = iota
	rejected
	quotaExceeded
	namespaceGoing
	unknown
)

// classify reads a dry run's error. The API server's answers about the
// pod (4xx: forbidden by a policy, plugin or webhook, invalid, a webhook
// that cannot take a dry run) are verdicts; the rest (no answer, 5xx such
// as a webhook that failed, throttling, timeouts, the autoscaler's own
// credentials refused or its RBAC short of creating pods) say nothing
// about the pod. A namespace being deleted takes no pod at all.
func classify(err error) verdictKind {
	if err == nil {
		return admitted
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return unknown
	}
	code, msg := status.Status().Code, status.Status().Message
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return namespaceGoing
	case code == http.StatusForbidden && strings.Contains(msg, "exceeded quota:"):
		return quotaExceeded
	case code == http.StatusForbidden && strings.Contains(msg, `cannot create resource "pods"`):
		// RBAC's answer about the autoscaler, not admission's about
		// the pod.
		return unknown
	case code == http.StatusUnauthorized, code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return unknown
	case code >= 400 && code < 500:
		return rejected
	}
	return unknown
}

// admissionPod is a pod of the buffer's template as its workload would
// create it: the template's labels, annotations and spec in the buffer's
// namespace, a generated name, nothing of ours (policies judge the pod,
// not where it came from).
func admissionPod(b *Buffer) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: generateName(b.Obj.Name), Namespace: b.Obj.Namespace,
			Labels: maps.Clone(b.Template.Labels), Annotations: maps.Clone(b.Template.Annotations)},
		Spec: *b.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = ""
	return pod
}

// generateName names the dry run's pods apart from any real pod (the API
// server adds a random suffix, and shortens a long base).
func generateName(buffer string) string { return "capacitybuffer-" + buffer + "-" }
