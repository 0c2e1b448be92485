package provreq

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

// MissingTemplateError is a podSet naming a PodTemplate that does not exist.
type MissingTemplateError struct {
	PodSet    int
	Namespace string
	Name      string
}

func (e *MissingTemplateError) Error() string {
	return fmt.Sprintf("podSet %d: PodTemplate %s/%s not found", e.PodSet, e.Namespace, e.Name)
}

// TooManyPodsError is a request asking for more pods than the autoscaler
// simulates per request (--max-pods-per-provisioning-request).
type TooManyPodsError struct {
	Pods, Max int64
}

func (e *TooManyPodsError) Error() string {
	return fmt.Sprintf("the request asks for %d pods, more than the %d this autoscaler simulates per ProvisioningRequest (--max-pods-per-provisioning-request); it is not simulated", e.Pods, e.Max)
}

// PodCount is how many pods a request asks for: its podSets' counts
// summed (in 64 bits: 32 podSets of 2^31-1 do not overflow it). A
// negative count, which the CRD refuses, counts as none.
func PodCount(pr *v1.ProvisioningRequest) int64 {
	var n int64
	for _, ps := range pr.Spec.PodSets {
		n += max(int64(ps.Count), 0)
	}
	return n
}

// PodsFor returns the pods a request asks capacity for, as upstream makes
// them (provisioningrequest/pods): count pods of each podSet's template,
// in the request's namespace, controlled by the request, annotated with
// it. They exist only in the simulation; their names and UIDs are stable
// so each loop simulates them alike.
//
// A request of more than maxPods pods is refused with a TooManyPodsError
// before anything is built: memory is bounded by maxPods, never by what
// the request asks. The pods of one podSet share one copy of the
// template's spec, labels, annotations and owner reference (only names
// and UIDs differ): the simulation never writes a pod it is given (the
// framework and the snapshot only read pods and store shallow copies;
// TestPodsShareTheirSpecUnchanged checks it), so count copies would only
// cost memory.
func PodsFor(pr *v1.ProvisioningRequest, templates corelisters.PodTemplateLister, maxPods int) ([]*corev1.Pod, error) {
	if n := PodCount(pr); n > int64(maxPods) {
		return nil, &TooManyPodsError{Pods: n, Max: int64(maxPods)}
	}
	pods := make([]*corev1.Pod, 0, PodCount(pr))
	owners := []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: Kind, Name: pr.Name, UID: pr.UID, Controller: ptr.To(true)}}
	for i, ps := range pr.Spec.PodSets {
		tmpl, err := templates.PodTemplates(pr.Namespace).Get(ps.PodTemplateRef.Name)
		if err != nil {
			return nil, &MissingTemplateError{PodSet: i, Namespace: pr.Namespace, Name: ps.PodTemplateRef.Name}
		}
		// One copy per podSet, never the lister's: the informer's
		// objects are shared with everything else that reads them.
		spec := *tmpl.Template.Spec.DeepCopy()
		labels := maps.Clone(tmpl.Template.Labels)
		annotations := maps.Clone(tmpl.Template.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1.ProvisioningRequestPodAnnotationKey] = pr.Name
		annotations[v1.ProvisioningClassPodAnnotationKey] = pr.Spec.ProvisioningClassName
		for j := range int(ps.Count) {
			name := fmt.Sprintf("%s-%d-%d", pr.Name, i, j)
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: pr.Namespace,
					UID:               types.UID(fmt.Sprintf("provreq/%s/%s/%s", pr.Namespace, pr.UID, name)),
					Labels:            labels,
					Annotations:       annotations,
					OwnerReferences:   owners,
					CreationTimestamp: pr.CreationTimestamp,
				},
				Spec: spec,
			})
		}
	}
	return pods, nil
}

// Consumes returns the name of the request whose capacity the pod
// consumes ("" for none), under the current or upstream's older annotation.
func Consumes(pod *corev1.Pod) string {
	if name := pod.Annotations[v1.ProvisioningRequestPodAnnotationKey]; name != "" {
		return name
	}
	return pod.Annotations[DeprecatedConsumeAnnotation]
}

// WithoutConsumers drops the pods that consume a request: their capacity
// is the request's to provide, never scaled up for pod by pod.
func WithoutConsumers(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if Consumes(p) == "" {
			out = append(out, p)
		}
	}
	return out
}

// boundConsumers counts, per request (namespace/name), the consuming pods
// that are or were bound: each one has taken one pod's share of the
// booked capacity.
func boundConsumers(pods []*corev1.Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		if name := Consumes(p); name != "" && p.Spec.NodeName != "" {
			out[p.Namespace+"/"+name]++
		}
	}
	return out
}
