// Package v1beta1 is autoscaling.x-k8s.io/v1beta1 CapacityBuffer, the
// spare-capacity object of SIG Autoscaling that the upstream cluster
// autoscaler and Karpenter read. The API module version this project pins
// predates it, so the types are defined here with the same wire format
// (field names, types, defaults): a buffer written for either works here.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1
