// Package v1alpha1 is the autoscaling.dra-autoscaler.io/v1alpha1 API: the
// CapacityReservation, capacity that is already paid for and that the
// cloud provider cannot report itself; and the NodeGroup, the autoscaler's
// read-only report of each node group it manages.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.dra-autoscaler.io
package v1alpha1
