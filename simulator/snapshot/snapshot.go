// Package snapshot holds the autoscaler's in-memory picture of the cluster:
// nodes with their pods, the DRA objects (ResourceSlices, ResourceClaims,
// DeviceClasses, DeviceTaintRules, claim templates) and the scheduling groups
// (PodGroups, CompositePodGroups, Workloads). The scheduler framework reads it
// through the lister contracts the kube-scheduler pins for autoscalers
// (pkg/scheduler/framework/autoscaler_contract in k8s.io/kubernetes); the
// simulator changes it speculatively and rolls back with Fork / Revert.
package snapshot

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// ClusterSnapshot is the contract of the simulator's cluster state.
//
// Reading. The embedded scheduler interfaces are what the framework reads:
// SharedLister (NodeInfos, StorageInfos, pod group states and objects),
// SharedDRAManager (claims with their allocated-device state, slices with
// DeviceTaintRules applied, device classes, the extended-resource class
// resolver) and PodGroupManager. Reads may run concurrently with each other
// (the framework filters nodes in parallel) but never with a mutation.
// Objects returned by reads belong to the snapshot and must not be modified.
// The allocated-device state returned by GatherAllocatedState and
// ListAllAllocatedDevices is a live view that is valid until the next
// mutation; it is kept up to date incrementally as claims change, so reading
// it costs O(1) whatever the number of claims.
//
// Writing. Nodes and pods are added and removed (duplicates are errors);
// API objects are upserted with Set and deleted with Remove. Objects passed
// in are stored as they are: the caller must not modify them afterwards.
// Mutations are not safe for concurrent use.
//
// Forking. Fork opens a level of speculative changes; levels nest. Revert
// drops every change made since the matching Fork, Commit keeps them as part
// of the level below (or as final changes when no fork is left). All three
// cost O(changes made in the level), independent of the cluster size; the
// first change of a node inside a level also copies that node's NodeInfo
// (O(pods on the node)), so NodeInfos handed out before the change keep
// their content. After Revert the snapshot reads exactly as before the Fork,
// including the order of NodeInfos().List().
type ClusterSnapshot interface {
	fwk.SharedLister
	fwk.SharedDRAManager
	fwk.PodGroupManager

	// AddNode adds a node without pods.
	AddNode(node *v1.Node) error
	// HasNode reports whether a node is in the snapshot; unlike
	// NodeInfos().Get it makes no error for a missing one, which picking
	// fresh node names asks about often.
	HasNode(name string) bool
	// RemoveNode removes a node, its pods and the ResourceSlices published
	// for it (spec.nodeName): node-local devices vanish with their node.
	RemoveNode(name string) error
	// AddPod places a pod on a node. The stored copy has spec.nodeName set.
	// A pod registered with AddPendingPod stops being pending. A pod whose
	// own spec.nodeName was empty counts as assumed (placed by simulation)
	// in its pod group, otherwise as assigned.
	AddPod(pod *v1.Pod, nodeName string) error
	// AddPodCopy is AddPod for a copy of the pod src describes (same UID),
	// differing from it at most in spec.nodeName and
	// status.resourceClaimStatuses, which is what binding and the
	// resourceclaim controller change: the stored pod shares src's
	// affinity terms and resources instead of having them computed again.
	AddPodCopy(pod *v1.Pod, nodeName string, src fwk.PodInfo) error
	// RemovePod removes a placed pod.
	RemovePod(namespace, name string) error
	// PlacedPod returns a placed pod as stored (spec.nodeName set).
	PlacedPod(namespace, name string) (*v1.Pod, bool)
	// AddPendingPod registers a pod that is not placed, so that its pod
	// group knows it (unscheduled pods count toward a gang's size).
	AddPendingPod(pod *v1.Pod) error
	// RemovePendingPod forgets a pending pod.
	RemovePendingPod(namespace, name string) error
	// PendingPod returns a registered pending pod.
	PendingPod(namespace, name string) (*v1.Pod, bool)

	SetResourceSlice(slice *resourceapi.ResourceSlice) error
	RemoveResourceSlice(name string) error
	// ScopeSlices limits, until called again, the slices that
	// ResourceSlices().ListWithDeviceTaintRules lists to those published
	// for the named nodes and those not bound to a node; nil lifts the
	// limit. It is a view, not a change: forks neither record nor revert
	// it. It is for callers that know the answer for the nodes they ask
	// about cannot depend on other nodes' slices (see the estimator), and
	// costs O(slices in scope) per listing instead of the allocator's
	// O(all slices) per scheduling cycle.
	ScopeSlices(nodes []string)
	SetDeviceClass(class *resourceapi.DeviceClass) error
	RemoveDeviceClass(name string) error
	SetDeviceTaintRule(rule *resourceapi.DeviceTaintRule) error
	RemoveDeviceTaintRule(name string) error
	// SetResourceClaim upserts a claim; the allocated-device state follows
	// the difference between the old and the new allocation.
	SetResourceClaim(claim *resourceapi.ResourceClaim) error
	RemoveResourceClaim(namespace, name string) error
	// ResourceClaim returns a claim; unlike ResourceClaims().Get it makes
	// no error for a missing one, which name generation asks about often.
	ResourceClaim(namespace, name string) (*resourceapi.ResourceClaim, bool)
	// ClaimsOwnedBy returns the claims whose controller is the object with
	// this UID (a pod, for claims made from its templates), sorted by name.
	ClaimsOwnedBy(uid types.UID) []*resourceapi.ResourceClaim
	// InFlightClaims returns the claims whose allocation the DRA plugin
	// signalled in Reserve and nobody wrote yet, sorted by namespace/name.
	InFlightClaims() []*resourceapi.ResourceClaim
	SetResourceClaimTemplate(template *resourceapi.ResourceClaimTemplate) error
	RemoveResourceClaimTemplate(namespace, name string) error
	ResourceClaimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, bool)

	SetPodGroup(group *schedulingapi.PodGroup) error
	RemovePodGroup(namespace, name string) error
	SetCompositePodGroup(group *schedulingv1alpha3.CompositePodGroup) error
	RemoveCompositePodGroup(namespace, name string) error
	SetWorkload(workload *schedulingapi.Workload) error
	RemoveWorkload(namespace, name string) error
	Workload(namespace, name string) (*schedulingapi.Workload, bool)

	// Fork opens a nested level of speculative changes.
	Fork()
	// Revert drops the changes of the innermost level.
	Revert() error
	// Commit keeps the changes of the innermost level.
	Commit() error
	// Depth is the number of open levels.
	Depth() int
	// Reset empties the snapshot, keeping whatever is bound to it (a
	// framework built over it). No fork may be open.
	Reset() error

	// MutableLister adapts the snapshot to the scheduler's
	// MutableSnapshotSharedLister (mutation sessions of preemption), on top
	// of Fork and Revert.
	MutableLister() fwk.MutableSnapshotSharedLister
}
