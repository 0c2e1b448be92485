package framework

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// specialClaimName is the in-memory name the DRA plugin gives the claim it
// makes for extended resources backed by DRA (dynamicresources,
// specialClaimInMemName); the scheduler creates it for real in PreBind.
const specialClaimName = "<extended-resources>"

// Placement is the outcome of SchedulePod.
type Placement struct {
	// Node is where the pod went; empty when it fits nowhere.
	Node string
	// Pod is the placed copy (spec.nodeName and claim statuses set), owned
	// by the snapshot: do not modify it. Nil when the pod fits nowhere.
	Pod *v1.Pod
	// Results holds the verdict of every candidate, in the given order.
	Results []NodeResult
}

// SchedulePod runs one scheduling cycle: PreFilter, Filter over the
// candidates in parallel, then Reserve on the first candidate (in the given
// order: the caller decides the preference) that passed. On success it does
// what the scheduler's PreBind and binding would: the allocations Reserve
// signalled are written into the claims with the pod in reservedFor, the
// in-flight entries are cleared, and the pod is added to the node. When the
// pod fits nowhere, the snapshot is left unchanged and Results says, per
// node, which plugin rejected it and why.
func (r *Runner) SchedulePod(ctx context.Context, pod *v1.Pod, candidates []string) (_ *Placement, err error) {
	logger := klog.FromContext(ctx)
	r.snap.Fork()
	keep := false
	defer func() {
		end := r.snap.Revert
		if keep {
			end = r.snap.Commit
		}
		if eerr := end(); eerr != nil && err == nil {
			err = fmt.Errorf("close snapshot fork: %w", eerr)
		}
	}()
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("schedule pod: %w", err)
	}
	state := schedframework.NewCycleState()
	results, err := r.filter(ctx, state, prepared, candidates)
	if err != nil {
		return nil, err
	}
	placement := &Placement{Results: results}
	for i := range results {
		if !results[i].Fits {
			continue
		}
		node := results[i].Node
		if st := r.fw.RunReservePluginsReserve(ctx, state, prepared, node); !st.IsSuccess() {
			r.fw.RunReservePluginsUnreserve(ctx, state, prepared, node)
			results[i].reject(st)
			logger.V(4).Info("Reserve failed, trying next node", "pod", klog.KObj(pod), "node", node, "plugin", st.Plugin(), "reason", st.Message())
			continue
		}
		placed, err := r.bind(prepared, node)
		if err != nil {
			return nil, fmt.Errorf("schedule pod %s/%s on %s: %w", pod.Namespace, pod.Name, node, err)
		}
		placement.Node, placement.Pod = node, placed
		keep = true
		logger.V(4).Info("Simulated placement", "pod", klog.KObj(pod), "node", node)
		return placement, nil
	}
	logger.V(4).Info("Pod fits on no candidate", "pod", klog.KObj(pod), "candidates", len(candidates))
	return placement, nil
}

// bind applies what PreBind and the binder would: allocations signalled
// in Reserve become claim status, every claim of the pod gets the pod in
// reservedFor, and the pod lands on the node.
func (r *Runner) bind(pod *v1.Pod, node string) (*v1.Pod, error) {
	tracker := r.snap.ResourceClaims()
	for _, inflight := range r.snap.InFlightClaims() {
		if inflight.Namespace != pod.Namespace || !r.belongsToPod(pod, inflight) {
			continue
		}
		claim, err := r.allocatedClaim(pod, inflight)
		if err != nil {
			return nil, err
		}
		if err := r.snap.SetResourceClaim(claim); err != nil {
			return nil, fmt.Errorf("store allocation of claim %s: %w", claim.Name, err)
		}
		tracker.MaybeRemoveClaimPendingAllocation(inflight.UID, true)
	}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, podClaim)
		if err != nil || name == nil {
			continue
		}
		claim, err := tracker.Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("claim %s after reserve: %w", *name, err)
		}
		// Workload-level claims (DRAWorkloadResourceClaims) are not
		// simulated yet: claims are reserved for the pod itself.
		binding, err := resourceclaim.BindTo(pod, nil, podClaim)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", *name, err)
		}
		if slices.ContainsFunc(claim.Status.ReservedFor, func(c resourceapi.ResourceClaimConsumerReference) bool { return c.UID == binding.UID }) {
			continue
		}
		claim = claim.DeepCopy()
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, binding)
		if err := r.snap.SetResourceClaim(claim); err != nil {
			return nil, fmt.Errorf("reserve claim %s: %w", claim.Name, err)
		}
	}
	if err := r.snap.AddPod(pod, node); err != nil {
		return nil, err
	}
	placed, ok := r.placedPod(pod, node)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s not found on %s after adding it", pod.Namespace, pod.Name, node)
	}
	return placed, nil
}

// belongsToPod tells whether an in-flight claim is one of the pod's: named
// in its claim statuses, or controlled by it (the extended-resource claim).
func (r *Runner) belongsToPod(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil && *name == claim.Name {
			return true
		}
	}
	for _, o := range claim.OwnerReferences {
		if o.UID == pod.UID && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// allocatedClaim turns an in-flight claim into the stored claim PreBind
// would write. The extended-resource claim exists only in memory until
// then: it gets a name the way the API server would generate it.
func (r *Runner) allocatedClaim(pod *v1.Pod, inflight *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	var claim *resourceapi.ResourceClaim
	if inflight.Name == specialClaimName {
		claim = inflight.DeepCopy()
		claim.Name = r.freeName(pod.Namespace, claim.GenerateName, string(pod.UID)+"/extended-resources")
		claim.UID = simulatedUID(pod.Namespace, claim.Name)
	} else {
		stored, err := r.snap.ResourceClaims().Get(inflight.Namespace, inflight.Name)
		if err != nil {
			return nil, fmt.Errorf("in-flight claim %s: %w", inflight.Name, err)
		}
		claim = stored.DeepCopy()
		claim.Status.Allocation = inflight.Status.Allocation.DeepCopy()
	}
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	}
	if inflight.Name == specialClaimName {
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	}
	return claim, nil
}

// placedPod returns the stored copy of a placed pod.
func (r *Runner) placedPod(pod *v1.Pod, node string) (*v1.Pod, bool) {
	ni, err := r.snap.Get(node)
	if err != nil {
		return nil, false
	}
	for _, pi := range ni.GetPods() {
		if pi.GetPod().UID == pod.UID {
			return pi.GetPod(), true
		}
	}
	return nil, false
}
