package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the autoscaler's own objects.
const GroupName = "autoscaling.dra-autoscaler.io"

var (
	// SchemeGroupVersion is this package's group and version.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	// Resource is the CapacityReservation resource, for dynamic clients.
	Resource = SchemeGroupVersion.WithResource("capacityreservations")
	// NodeGroupResource is the NodeGroup resource, for dynamic clients.
	NodeGroupResource = SchemeGroupVersion.WithResource("nodegroups")
	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CapacityReservation{}, &CapacityReservationList{}, &NodeGroup{}, &NodeGroupList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
