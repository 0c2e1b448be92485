package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer declares spare capacity: a number of pods of some shape
// that the autoscaler keeps room for, without the pods existing.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use v1beta1"
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.provisioningStrategy`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="PodTemplate",type=string,JSONPath=`.status.podTemplateRef.name`
// +kubebuilder:printcolumn:name="Provisioning",type=string,JSONPath=`.status.conditions[?(@.type=='Provisioning')].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CapacityBufferSpec   `json:"spec"`
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ScalableRef names an object with a scale subresource: a workload whose
// replicas and pod shape the buffer follows.
type ScalableRef struct {
	// APIGroup of the object; empty (or "core") for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the object: any kind served with a scale subresource
	// (Deployment, ReplicaSet, StatefulSet, ReplicationController, a
	// custom resource with scale), or a Job.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ResourceName names a resource, as core/v1's does.
type ResourceName string

// ResourceList is resource quantities by name, as core/v1's.
type ResourceList map[ResourceName]resource.Quantity

// CapacityBufferSpec is the capacity wanted.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="at most one of podTemplateRef and scalableRef may be set"
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="a buffer with podTemplateRef needs replicas or limits"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the buffer is used; this autoscaler
	// serves buffer.x-k8s.io/active-capacity and leaves others alone.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
	// PodTemplateRef names a PodTemplate in the buffer's namespace: the
	// shape of one chunk of the buffer. At most one of podTemplateRef and
	// scalableRef; with neither (as upstream's schema allows), the chunk's
	// shape is the PodTemplate status.podTemplateRef names, written by a
	// controller of the user's, and the buffer holds as many chunks as
	// limits allow.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// ScalableRef names an object with a scale subresource whose pods'
	// shape is the chunk's and whose replicas percentage counts from.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`
	// Replicas is the number of chunks. With percentage too, the larger
	// of the two; with neither, as many as limits allow.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Percentage of the scalableRef workload's replicas, rounded up.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Percentage *int32 `json:"percentage,omitempty"`
	// Limits cap the chunks by their summed resource requests.
	// +optional
	Limits *ResourceList `json:"limits,omitempty"`
	// RefillStrategy says what happens to capacity real pods consume:
	// recreate (the default) holds the buffer's size again, none makes
	// the buffer one-shot: consumed capacity is not recreated, and the
	// buffer ends Fulfilled once consumedReplicas reaches replicas. A
	// one-shot buffer needs podTemplateRef and replicas, and no limits.
	// (Open proposal: kubernetes/autoscaler#10108.)
	// +kubebuilder:validation:Enum=recreate;none
	// +kubebuilder:default=recreate
	// +optional
	RefillStrategy *string `json:"refillStrategy,omitempty"`
	// FillDeadlineSeconds bounds how long a one-shot buffer holds capacity
	// unfilled, counted from when it became ReadyForProvisioning; then it
	// ends Expired (FillDeadlineExceeded) and holds nothing. Ignored
	// unless refillStrategy is none.
	// +kubebuilder:validation:Minimum=1
	// +optional
	FillDeadlineSeconds *int32 `json:"fillDeadlineSeconds,omitempty"`
}

// CapacityBufferStatus is what the autoscaler resolved and holds.
type CapacityBufferStatus struct {
	// PodTemplateRef is the PodTemplate the chunks were made from.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`
	// Replicas is the number of chunks held.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// ReadyReplicas is how many of the chunks fit capacity that exists
	// and is ready now (registered Ready nodes), not nodes still coming:
	// the readyReplicas of upstream's accepted proposal.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// ConsumedReplicas (one-shot buffers) is the high-water mark of the
	// chunks the buffer's bound pods have taken; it never decreases, and
	// only replicas minus it are held.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ConsumedReplicas *int32 `json:"consumedReplicas,omitempty"`
	// PodTemplateGeneration is the generation of the template the chunks
	// were made from.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`
	// Conditions: ReadyForProvisioning, Provisioning, LimitedByQuotas;
	// a one-shot buffer ends with Fulfilled or Expired.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ProvisioningStrategy is the strategy the buffer was served with.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
