package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group shared with upstream's autoscaling objects
// (ProvisioningRequest, CapacityBuffer).
const GroupName = "autoscaling.x-k8s.io"

// Kind is the object's kind, for events and references.
const Kind = "CapacityBuffer"

var (
	// SchemeGroupVersion is this package's group and version.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}
	// Resource is the CapacityBuffer resource, for dynamic clients.
	Resource = SchemeGroupVersion.WithResource("capacitybuffers")
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
