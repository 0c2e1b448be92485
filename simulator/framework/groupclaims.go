package framework

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/kubernetes/pkg/features"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// PodGroup claims (DRAWorkloadResourceClaims): a pod claim that matches one
// of its PodGroup's spec.resourceClaims (same name, same claim or template)
// uses the PodGroup's claim, one for every member, allocated once. The
// resourceclaim controller makes that claim for the PodGroup
// (pkg/controller/resourceclaim handlePodGroupClaim: owner the PodGroup,
// generateName "<podgroup>-<claim>-", recorded in the PodGroup's and the
// members' claim statuses); the simulation makes it the same way when the
// controller has not yet.

// GroupClaimOwner is the PodGroup in snap whose claim pod's podClaim
// resolves to, nil when the claim is the pod's own (or the gate is off, or
// the PodGroup is not known).
func GroupClaimOwner(snap *snapshot.Snapshot, pod *v1.Pod, podClaim *v1.PodResourceClaim) *schedulingv1beta1.PodGroup {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil ||
		!utilfeature.DefaultFeatureGate.Enabled(features.DRAWorkloadResourceClaims) {
		return nil
	}
	pg, err := snap.PodGroups().Get(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName)
	if err != nil || len(pg.Spec.ResourceClaims) == 0 {
		return nil
	}
	bind, err := resourceclaim.BindTo(pod, pg, podClaim)
	if err != nil || bind.APIGroup != schedulingv1beta1.GroupName || bind.Resource != "podgroups" {
		return nil
	}
	return pg
}

// GroupClaimOwner is GroupClaimOwner in the runner's snapshot.
func (r *Runner) GroupClaimOwner(pod *v1.Pod, podClaim *v1.PodResourceClaim) *schedulingv1beta1.PodGroup {
	return GroupClaimOwner(r.snap, pod, podClaim)
}

// groupClaimMade is the name of pg's claim podClaim that its status
// records and the snapshot holds, "" when there is none yet.
func (r *Runner) groupClaimMade(pg *schedulingv1beta1.PodGroup, podClaim string) string {
	for _, s := range pg.Status.ResourceClaimStatuses {
		if s.Name == podClaim && s.ResourceClaimName != nil {
			if _, ok := r.snap.ResourceClaim(pg.Namespace, *s.ResourceClaimName); ok {
				return *s.ResourceClaimName
			}
		}
	}
	return ""
}
