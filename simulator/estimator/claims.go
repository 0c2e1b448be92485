package estimator

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// A copied placement must create the claims the framework would create for
// the pod's template claims, under the same names, or estimates with and
// without the memo would differ: both take them from the runner's
// TemplateClaim. TestMemoIsExact compares claim names and contents between
// both paths.

// claimFor returns the claim a pod claim resolves to; for a template claim
// not created yet, a new claim (made reports that) which the caller
// stores. Nil without error when the controller decided no claim is
// needed. Memoizable pods own no claims yet (see resolve), so unlike the
// framework there is no orphan to look for first.
func claimFor(runner *framework.Runner, pod *v1.Pod, podClaim *v1.PodResourceClaim) (claim *resourceapi.ResourceClaim, made bool, err error) {
	snap := runner.Snapshot()
	if !framework.ClaimNotMadeYet(pod, podClaim) {
		// Checked first: resourceclaim.Name reports a claim not made yet
		// with an error, which costs more to build than the check.
		name, _, err := resourceclaim.Name(pod, podClaim)
		switch {
		case err == nil && name == nil:
			return nil, false, nil
		case err == nil:
			claim, err := snap.ResourceClaims().Get(pod.Namespace, *name)
			return claim, false, err
		default:
			return nil, false, err
		}
	}
	tmpl, ok := snap.ResourceClaimTemplate(pod.Namespace, *podClaim.ResourceClaimTemplateName)
	if !ok {
		return nil, false, fmt.Errorf("claim template %s/%s not in the snapshot", pod.Namespace, *podClaim.ResourceClaimTemplateName)
	}
	return runner.TemplateClaim(pod, podClaim, tmpl), true, nil
}
