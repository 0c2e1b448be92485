package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// PodBuilder builds a corev1.Pod with a single container named "main". A new
// pod is Pending, unscheduled and requests nothing.
type PodBuilder struct {
	pod corev1.Pod
}

// Pod starts a pod in namespace ns.
func Pod(ns, name string) *PodBuilder {
	return &PodBuilder{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			UID:       uidFor("pod", ns, name),
			Labels:    map[string]string{},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{},
					Limits:   corev1.ResourceList{},
				},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// Label sets one label.
func (b *PodBuilder) Label(key, value string) *PodBuilder {
	b.pod.Labels[key] = value
	return b
}

// Annotation sets one annotation.
func (b *PodBuilder) Annotation(key, value string) *PodBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[key] = value
	return b
}

// UID overrides the deterministic UID.
func (b *PodBuilder) UID(uid types.UID) *PodBuilder {
	b.pod.UID = uid
	return b
}

// CPU sets the container's CPU request.
func (b *PodBuilder) CPU(q string) *PodBuilder {
	return b.Request(corev1.ResourceCPU, q)
}

// Memory sets the container's memory request.
func (b *PodBuilder) Memory(q string) *PodBuilder {
	return b.Request(corev1.ResourceMemory, q)
}

// Request sets a container request. Extended resources (those with a domain,
// like example.com/gpu) also get an equal limit, as the API requires.
func (b *PodBuilder) Request(name corev1.ResourceName, q string) *PodBuilder {
	c := &b.pod.Spec.Containers[0]
	c.Resources.Requests[name] = quantity(q)
	if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
		c.Resources.Limits[name] = quantity(q)
	}
	return b
}

// Node binds the pod to a node and marks it Running, as a scheduled pod
// observed in a cluster would be.
func (b *PodBuilder) Node(nodeName string) *PodBuilder {
	b.pod.Spec.NodeName = nodeName
	b.pod.Status.Phase = corev1.PodRunning
	return b
}

// ClaimFromTemplate adds a pod-level resource claim created from a
// ResourceClaimTemplate and references it from the container.
func (b *PodBuilder) ClaimFromTemplate(podClaimName, templateName string) *PodBuilder {
	return b.addClaim(corev1.PodResourceClaim{Name: podClaimName, ResourceClaimTemplateName: ptr.To(templateName)})
}

// Claim adds a pod-level reference to an existing ResourceClaim and
// references it from the container.
func (b *PodBuilder) Claim(podClaimName, claimName string) *PodBuilder {
	return b.addClaim(corev1.PodResourceClaim{Name: podClaimName, ResourceClaimName: ptr.To(claimName)})
}

func (b *PodBuilder) addClaim(c corev1.PodResourceClaim) *PodBuilder {
	b.pod.Spec.ResourceClaims = append(b.pod.Spec.ResourceClaims, c)
	ctr := &b.pod.Spec.Containers[0]
	ctr.Resources.Claims = append(ctr.Resources.Claims, corev1.ResourceClaim{Name: c.Name})
	return b
}

// ClaimStatus records which ResourceClaim was created for a template claim,
// as the resourceclaim controller does in status.resourceClaimStatuses.
func (b *PodBuilder) ClaimStatus(podClaimName, claimName string) *PodBuilder {
	b.pod.Status.ResourceClaimStatuses = append(b.pod.Status.ResourceClaimStatuses,
		corev1.PodResourceClaimStatus{Name: podClaimName, ResourceClaimName: ptr.To(claimName)})
	return b
}

// PodGroup makes the pod a member of the PodGroup named name
// (spec.schedulingGroup.podGroupName).
func (b *PodBuilder) PodGroup(name string) *PodBuilder {
	b.pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	return b
}

// OwnedBy adds a controller owner reference, e.g. ("apps/v1", "ReplicaSet",
// "rs-1") or ("batch/v1", "Job", "train").
func (b *PodBuilder) OwnedBy(apiVersion, kind, name string) *PodBuilder {
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion,
		Kind:       kind,
		Name:       name,
		UID:        uidFor(kind, b.pod.Namespace, name),
		Controller: ptr.To(true),
	})
	return b
}

// Priority sets spec.priority (what admission would resolve from the class).
func (b *PodBuilder) Priority(p int32) *PodBuilder {
	b.pod.Spec.Priority = ptr.To(p)
	return b
}

// PriorityClass sets spec.priorityClassName.
func (b *PodBuilder) PriorityClass(name string) *PodBuilder {
	b.pod.Spec.PriorityClassName = name
	return b
}

// NodeSelector adds one node selector term key=value.
func (b *PodBuilder) NodeSelector(key, value string) *PodBuilder {
	if b.pod.Spec.NodeSelector == nil {
		b.pod.Spec.NodeSelector = map[string]string{}
	}
	b.pod.Spec.NodeSelector[key] = value
	return b
}

// SchedulerName sets spec.schedulerName: the scheduler profile that
// places the pod.
func (b *PodBuilder) SchedulerName(name string) *PodBuilder {
	b.pod.Spec.SchedulerName = name
	return b
}

// Toleration adds a toleration; an empty value means operator Exists.
func (b *PodBuilder) Toleration(key, value string, effect corev1.TaintEffect) *PodBuilder {
	t := corev1.Toleration{Key: key, Value: value, Effect: effect, Operator: corev1.TolerationOpEqual}
	if value == "" {
		t.Operator = corev1.TolerationOpExists
	}
	b.pod.Spec.Tolerations = append(b.pod.Spec.Tolerations, t)
	return b
}

// Obj returns a copy of the pod built so far.
func (b *PodBuilder) Obj() *corev1.Pod {
	return b.pod.DeepCopy()
}
