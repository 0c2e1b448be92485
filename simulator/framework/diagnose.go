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
	// Shortage, when no constraint is to blame, says which request the
	// node cannot meet and how far it falls short: "request gpu asks 9
	// devices of class gpu; the node offers 8".
	Shortage string
	// AtMost, for a constraint to blame whose requests ask the same count,
	// says how many the node offers under it: "the node offers at most 3
	// of the 4 gpu+nic sets with one pcieRoot".
	AtMost string
	// PodGroup names the PodGroup whose claim it is (one claim for all
	// its members), "" for the pod's own.
	PodGroup string
}

func (b Blame) String() string {
	claim := b.PodClaim
	if b.PodGroup != "" {
		claim += " (the claim of PodGroup " + b.PodGroup + ", shared by its members)"
	}
	if b.Shortage != "" {
		return fmt.Sprintf("%s of claim %s", b.Shortage, claim)
	}
	if b.AtMost != "" {
		return fmt.Sprintf("%s of claim %s: %s", b.Constraint, claim, b.AtMost)
	}
	return fmt.Sprintf("%s of claim %s", b.Constraint, claim)
}

// ofGroups names, on each blame, the PodGroup whose claim it is.
func (r *Runner) ofGroups(pod *v1.Pod, blames []Blame) []Blame {
	for i := range blames {
		for j := range pod.Spec.ResourceClaims {
			if pc := &pod.Spec.ResourceClaims[j]; pc.Name == blames[i].PodClaim {
				if pg := r.GroupClaimOwner(pod, pc); pg != nil {
					blames[i].PodGroup = pg.Name
				}
			}
		}
	}
	return blames
}

// DiagnoseClaims says which claim constraints keep a pod off a node that
// DynamicResources rejects it on: the real filters run again on the node
// with each constraint of the pod's claims removed in turn, and every
// constraint whose removal lets the pod fit is returned. Nil means the
// node does not reject the pod through DynamicResources, or no single
// constraint is to blame and no request alone falls short. When no
// constraint is to blame, each request the node cannot meet on its own is
// returned with what the node offers of it (the most devices of that
// request the real allocator finds there). The snapshot is left as it
// was.
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
	var claims []claimOf
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
			fits, err := r.fitsWith(ctx, prepared, node, withoutConstraint(claim, j))
			if err != nil {
				return nil, fmt.Errorf("diagnose pod %s/%s claim %s: %w", pod.Namespace, pod.Name, *name, err)
			}
			if fits {
				atMost, err := r.underConstraint(ctx, prepared, node, claim, j)
				if err != nil {
					return nil, fmt.Errorf("diagnose pod %s/%s claim %s: %w", pod.Namespace, pod.Name, *name, err)
				}
				out = append(out, Blame{PodClaim: podClaim.Name, Claim: *name, AtMost: atMost,
					Constraint: DescribeConstraint(&claim.Spec.Devices.Constraints[j], len(claim.Spec.Devices.Requests))})
			}
		}
		claims = append(claims, claimOf{podClaim.Name, claim})
	}
	if len(out) > 0 {
		return r.ofGroups(prepared, out), nil
	}
	for _, c := range claims {
		short, err := r.shortages(ctx, prepared, node, c.podClaim, c.claim)
		if err != nil {
			return nil, fmt.Errorf("diagnose pod %s/%s claim %s: %w", pod.Namespace, pod.Name, c.claim.Name, err)
		}
		out = append(out, short...)
	}
	return r.ofGroups(prepared, out), nil
}

type claimOf struct {
	podClaim string
	claim    *resourceapi.ResourceClaim
}

// shortages are the requests of claim that the node cannot meet even
// alone (no other request, no constraint), each with the largest count of
// it the real allocator finds on the node. Only requests for an exact
// count are measured; the others are not described.
func (r *Runner) shortages(ctx context.Context, pod *v1.Pod, node, podClaim string, claim *resourceapi.ResourceClaim) ([]Blame, error) {
	var out []Blame
	for i := range claim.Spec.Devices.Requests {
		req := &claim.Spec.Devices.Requests[i]
		ex := req.Exactly
		if ex == nil || ex.AllocationMode != resourceapi.DeviceAllocationModeExactCount || ex.Count < 1 {
			continue
		}
		fits := func(n int64) (bool, error) { return r.fitsWith(ctx, pod, node, onlyRequest(claim, i, n)) }
		// The largest count that fits (0 always does).
		lo, err := LargestFitting(0, ex.Count, fits)
		if err != nil {
			return nil, err
		}
		if lo == ex.Count {
			continue
		}
		msg := fmt.Sprintf("request %s asks %d device(s) of class %s; the node offers %d", req.Name, ex.Count, ex.DeviceClassName, lo)
		if lo == 0 {
			msg = fmt.Sprintf("request %s asks %d device(s) of class %s; the node has none that match", req.Name, ex.Count, ex.DeviceClassName)
		}
		sets, err := r.countersToBlame(ctx, pod, node, onlyRequest(claim, i, ex.Count))
		if err != nil {
			return nil, err
		}
		if len(sets) > 0 {
			msg += fmt.Sprintf(" (it has enough such devices, but they draw on the shared counters of %s, which are used up)", strings.Join(sets, ", "))
		}
		out = append(out, Blame{PodClaim: podClaim, Claim: claim.Name, Shortage: msg})
	}
	return out, nil
}

// underConstraint measures how much of claim the node can give under its
// constraint j alone: the largest count n (below what the constraint's
// requests ask, which must all be the same exact count) for which the
// claim with each of those requests asking n fits, by bisection. "" when
// the requests ask different counts or not an exact count.
func (r *Runner) underConstraint(ctx context.Context, pod *v1.Pod, node string, claim *resourceapi.ResourceClaim, j int) (string, error) {
	c := &claim.Spec.Devices.Constraints[j]
	covered := map[string]bool{}
	for _, name := range c.Requests {
		covered[name] = true
	}
	var names []string
	var want int64
	for _, req := range claim.Spec.Devices.Requests {
		if len(covered) > 0 && !covered[req.Name] {
			continue
		}
		ex := req.Exactly
		if ex == nil || ex.AllocationMode != resourceapi.DeviceAllocationModeExactCount || ex.Count < 1 || (want != 0 && ex.Count != want) {
			return "", nil
		}
		want = ex.Count
		names = append(names, req.Name)
	}
	if len(names) == 0 {
		return "", nil
	}
	var attr, with string
	switch {
	case c.MatchAttribute != nil:
		attr, with = string(*c.MatchAttribute), "with one "
	case c.DistinctAttribute != nil:
		attr, with = string(*c.DistinctAttribute), "each with its own "
	default:
		return "", nil
	}
	what := "devices of request " + names[0]
	if len(names) > 1 {
		what = strings.Join(names, "+") + " sets"
	}
	lo, hi := int64(0), want
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := r.fitsWith(ctx, pod, node, withCount(claim, covered, mid))
		if err != nil {
			return "", err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	switch {
	case lo == 0 && want == 1 && len(names) > 1:
		return fmt.Sprintf("the node has no %s set %s%s", strings.Join(names, "+"), with, attr), nil
	case lo == 0:
		return fmt.Sprintf("the node offers none of the %d %s %s%s", want, what, with, attr), nil
	}
	return fmt.Sprintf("the node offers at most %d of the %d %s %s%s", lo, want, what, with, attr), nil
}

// withCount is claim with the requests in covered (all, when empty)
// asking n devices each.
func withCount(claim *resourceapi.ResourceClaim, covered map[string]bool, n int64) *resourceapi.ResourceClaim {
	c := *claim
	c.Spec.Devices.Requests = slices.Clone(claim.Spec.Devices.Requests)
	for i := range c.Spec.Devices.Requests {
		req := &c.Spec.Devices.Requests[i]
		if len(covered) > 0 && !covered[req.Name] || req.Exactly == nil {
			continue
		}
		ex := *req.Exactly
		ex.Count = n
		req.Exactly = &ex
	}
	return &c
}

// countersToBlame names the counter sets of node's partitionable devices
// when c would fit were its devices not drawing on them (the same devices,
// in a fork, consuming no counters): then the counters, not the devices,
// are short. Nil when the node has no such devices or counters are not
// the reason.
func (r *Runner) countersToBlame(ctx context.Context, pod *v1.Pod, node string, c *resourceapi.ResourceClaim) (_ []string, err error) {
	all, err := r.snap.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, err
	}
	var consuming []*resourceapi.ResourceSlice
	sets := map[string]bool{}
	for _, sl := range all {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName != node {
			continue
		}
		uses := false
		for _, d := range sl.Spec.Devices {
			for _, cc := range d.ConsumesCounters {
				sets[cc.CounterSet], uses = true, true
			}
		}
		if uses {
			consuming = append(consuming, sl)
		}
	}
	if len(consuming) == 0 {
		return nil, nil
	}
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	for _, sl := range consuming {
		free := sl.DeepCopy()
		for i := range free.Spec.Devices {
			free.Spec.Devices[i].ConsumesCounters = nil
		}
		if err := r.snap.SetResourceSlice(free); err != nil {
			return nil, err
		}
	}
	fits, err := r.fitsWith(ctx, pod, node, c)
	if err != nil || !fits {
		return nil, err
	}
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// withoutConstraint is claim with constraint j removed.
func withoutConstraint(claim *resourceapi.ResourceClaim, j int) *resourceapi.ResourceClaim {
	c := *claim
	c.Spec.Devices.Constraints = slices.Delete(slices.Clone(claim.Spec.Devices.Constraints), j, j+1)
	return &c
}

// onlyRequest is claim asking only for n devices of request i, without
// constraints (a probe of what the node offers of that request).
func onlyRequest(claim *resourceapi.ResourceClaim, i int, n int64) *resourceapi.ResourceClaim {
	c := *claim
	req := claim.Spec.Devices.Requests[i]
	ex := *req.Exactly
	ex.Count = n
	req.Exactly = &ex
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{req}
	c.Spec.Devices.Constraints = nil
	c.Spec.Devices.Config = nil
	return &c
}

// fitsWith runs the filters on node with claim replaced by c, in a fork
// of its own.
func (r *Runner) fitsWith(ctx context.Context, pod *v1.Pod, node string, c *resourceapi.ResourceClaim) (_ bool, err error) {
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err := r.snap.SetResourceClaim(c); err != nil {
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
