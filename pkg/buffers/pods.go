package buffers

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// PodAnnotation marks a simulated buffer pod with its buffer's name; such
// pods exist only in the simulation.
const PodAnnotation = "autoscaling.dra-autoscaler.io/capacity-buffer"

// uidPrefix starts every buffer pod's UID.
const uidPrefix = "capacitybuffer/"

// IsBufferPod tells a simulated buffer pod from a real one.
func IsBufferPod(p *corev1.Pod) bool { return strings.HasPrefix(string(p.UID), uidPrefix) }

// podsFor makes n pods of the buffer's template: in its namespace,
// controlled by it, with names and UIDs stable across passes so each pass
// simulates them alike (their simulated claims are named alike too).
func podsFor(b *v1beta1.CapacityBuffer, t *corev1.PodTemplateSpec, n int32) []*corev1.Pod {
	owner := metav1.OwnerReference{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.Kind, Name: b.Name, UID: b.UID, Controller: ptr.To(true)}
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		name := fmt.Sprintf("capacitybuffer-%s-%d", b.Name, i)
		ann := maps.Clone(t.Annotations)
		if ann == nil {
			ann = map[string]string{}
		}
		ann[PodAnnotation] = b.Name
		spec := *t.Spec.DeepCopy()
		spec.NodeName = ""
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: b.Namespace,
				UID:               types.UID(fmt.Sprintf("%s%s/%s/%d", uidPrefix, b.Namespace, b.UID, i)),
				Labels:            maps.Clone(t.Labels),
				Annotations:       ann,
				OwnerReferences:   []metav1.OwnerReference{owner},
				CreationTimestamp: b.CreationTimestamp,
			},
			Spec:   spec,
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		})
	}
	return pods
}
