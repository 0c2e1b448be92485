// Package v1alpha1 is autoscaling.x-k8s.io/v1alpha1 CapacityBuffer, the
// first version upstream served (deprecated there, still served, and the
// one Karpenter's design names). Its schema is v1beta1's; the CRD serves
// both with no conversion (the API server only rewrites apiVersion) and
// stores v1beta1, which is the only version the autoscaler reads.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1alpha1
