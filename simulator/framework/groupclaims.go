package framework

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/ptr"

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

// groupClaim finds or makes the claim of pg that podClaim names, and
// returns its name ("" when its template is unknown: the DRA plugin then
// reports the claim as missing).
func (r *Runner) groupClaim(pod *v1.Pod, pg *schedulingv1beta1.PodGroup, podClaim *v1.PodResourceClaim) (string, error) {
	for _, s := range pg.Status.ResourceClaimStatuses {
		if s.Name == podClaim.Name && s.ResourceClaimName != nil {
			if _, ok := r.snap.ResourceClaim(pg.Namespace, *s.ResourceClaimName); ok {
				return *s.ResourceClaimName, r.defaultClaim(pg.Namespace, *s.ResourceClaimName)
			}
		}
	}
	if podClaim.ResourceClaimName != nil {
		return *podClaim.ResourceClaimName, r.defaultClaim(pg.Namespace, *podClaim.ResourceClaimName)
	}
	// Made already (by the controller before the status shows it, or by
	// an earlier member's simulation).
	for _, c := range r.snap.ClaimsOwnedBy(pg.UID) {
		if c.Annotations[resourceapi.PodResourceClaimAnnotation] == podClaim.Name {
			return c.Name, r.defaultClaim(c.Namespace, c.Name)
		}
	}
	tmpl, ok := r.snap.ResourceClaimTemplate(pg.Namespace, *podClaim.ResourceClaimTemplateName)
	if !ok {
		r.logger.V(4).Info("Claim template not in snapshot", "pod", klog.KObj(pod), "podGroup", klog.KObj(pg), "template", *podClaim.ResourceClaimTemplateName)
		return "", nil
	}
	claim := r.TemplateClaim(pod, podClaim, tmpl)
	claim.GenerateName = generateNameFor(pg.Name, podClaim.Name)
	claim.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup", Name: pg.Name, UID: pg.UID, Controller: ptr.To(true),
	}}
	claim.Name = r.freeName(pg.Namespace, claim.GenerateName, string(pg.UID)+"/"+podClaim.Name)
	claim.UID = simulatedUID(pg.Namespace, claim.Name)
	if err := r.snap.SetResourceClaim(claim); err != nil {
		return "", fmt.Errorf("simulate claim %s for PodGroup %s/%s: %w", podClaim.Name, pg.Namespace, pg.Name, err)
	}
	r.logger.V(5).Info("Simulated PodGroup claim", "podGroup", klog.KObj(pg), "claim", klog.KObj(claim))
	return claim.Name, nil
}
