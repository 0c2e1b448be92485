package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// DynamicResources is the name of the scheduler's DRA plugin, as
// NodeResult.Plugin reports it.
const DynamicResources = names.DynamicResources

// Blame is a constraint of one of the pod's claims without which the pod
// would fit the node: the one to relax, or the one no node offers.
type Blame struct {
	// PodClaim is the claim's name in the pod (spec.resourceClaims[].name).
	PodClaim string
	// Claim is the ResourceClaim's name (simulated for template claims).
	Claim string
	// Constraint describes it: "matchAttribute <attribute>" or
	// "distinctAttribute <attribute>", with the requests it covers when it
	// does not cover all of them.
	Constraint string
}

func (b Blame) String() string {
	return fmt.Sprintf("%s of claim %s", b.Constraint, b.PodClaim)
}

// DiagnoseClaims says which claim constraints keep a pod off a node that
// DynamicResources rejects it on: the real filters run again on the node
// with each constraint of the pod's claims removed in turn, and every
// constraint whose removal lets the pod fit is returned. Nil means the
// node does not reject the pod through DynamicResources, or no single
// constraint is to blame (the requests themselves cannot be met). The
// snapshot is left as it was.
func (r *Runner) DiagnoseClaims(ctx context.Context, pod *v1.Pod, node string) (_ []Blame, err error) {
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("revert snapshot after diagnosis: %w", rerr)
		}
	}()
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("diagnose pod: %w", err)
	}
	base, err := r.filter(ctx, schedframework.NewCycleState(), prepared, []string{node})
	if err != nil {
		return nil, err
	}
	if base[0].Fits || base[0].Plugin != DynamicResources {
		return nil, nil
	}
	var out []Blame
	for i := range prepared.Spec.ResourceClaims {
		podClaim := &prepared.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(prepared, podClaim)
		if err != nil || name == nil {
			continue
		}
		claim, ok := r.snap.ResourceClaim(prepared.Namespace, *name)
		if !ok || claim.Status.Allocation != nil {
			// An allocated claim is pinned; its constraints are history.
			continue
		}
		for j := range claim.Spec.Devices.Constraints {
			fits, err := r.fitsWithout(ctx, prepared, node, claim, j)
			if err != nil {
				return nil, fmt.Errorf("diagnose pod %s/%s claim %s: %w", pod.Namespace, pod.Name, *name, err)
			}
			if fits {
				out = append(out, Blame{PodClaim: podClaim.Name, Claim: *name,
					Constraint: DescribeConstraint(&claim.Spec.Devices.Constraints[j], len(claim.Spec.Devices.Requests))})
			}
		}
	}
	return out, nil
}

// fitsWithout runs the filters on node with constraint j of claim removed,
// in a fork of its own.
func (r *Runner) fitsWithout(ctx context.Context, pod *v1.Pod, node string, claim *resourceapi.ResourceClaim, j int) (_ bool, err error) {
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	c := *claim
	c.Spec.Devices.Constraints = slices.Delete(slices.Clone(claim.Spec.Devices.Constraints), j, j+1)
	if err := r.snap.SetResourceClaim(&c); err != nil {
		return false, err
	}
	res, err := r.filter(ctx, schedframework.NewCycleState(), pod, []string{node})
	if err != nil {
		return false, err
	}
	return res[0].Fits, nil
}

// DescribeConstraint names a device constraint as a user writes it;
// requests of the claim is how many requests it has, so that a constraint
// over a subset says which.
func DescribeConstraint(c *resourceapi.DeviceConstraint, requests int) string {
	var s string
	switch {
	case c.MatchAttribute != nil:
		s = "matchAttribute " + string(*c.MatchAttribute)
	case c.DistinctAttribute != nil:
		s = "distinctAttribute " + string(*c.DistinctAttribute)
	default:
		s = "constraint"
	}
	if len(c.Requests) > 0 && len(c.Requests) < requests {
		s += " (requests " + strings.Join(c.Requests, ", ") + ")"
	}
	return s
}
