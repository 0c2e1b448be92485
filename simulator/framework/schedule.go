package framework

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// specialClaimName is the in-memory name the DRA plugin gives the claim it
// makes for extended resources backed by DRA (dynamicresources,
// specialClaimInMemName); the scheduler creates it for real in PreBind.
const specialClaimName = "<extended-resources>"

// ScheduleResult is the outcome of SchedulePod.
type ScheduleResult struct {
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
func (r *Runner) SchedulePod(ctx context.Context, pod *v1.Pod, candidates []string) (*ScheduleResult, error) {
	return r.schedulePod(ctx, pod, nil, candidates)
}

// SchedulePodInfo is SchedulePod for a pod the caller schedules again and
// again (an estimator does, once per node group): info is the pod's
// scheduler PodInfo (framework.NewPodInfo), which the caller keeps as long
// as it keeps the pod unmodified. The placed pod shares its affinity terms
// and resources (snapshot AddPodCopy) rather than have them computed anew
// on every placement, which was most of the cost of binding.
func (r *Runner) SchedulePodInfo(ctx context.Context, info fwk.PodInfo, candidates []string) (*ScheduleResult, error) {
	if info == nil {
		return nil, fmt.Errorf("schedule pod: nil pod info")
	}
	return r.schedulePod(ctx, info.GetPod(), info, candidates)
}

func (r *Runner) schedulePod(ctx context.Context, pod *v1.Pod, info fwk.PodInfo, candidates []string) (*ScheduleResult, error) {
	return r.schedulePodIn(ctx, schedframework.NewCycleState(), pod, info, candidates)
}

// schedulePodIn is schedulePod with the cycle state given: a pod group
// cycle passes one that carries its group and placement states.
func (r *Runner) schedulePodIn(ctx context.Context, state *schedframework.CycleState, pod *v1.Pod, info fwk.PodInfo, candidates []string) (_ *ScheduleResult, err error) {
	logger := klog.FromContext(ctx)
	r.snap.Fork()
	keep := false
	defer func() { r.closeFork(keep, &err) }()
	// Runs first: a panic in binding still closes the fork above.
	defer recoverPlugin(pod, "", &err)
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("schedule pod: %w", err)
	}
	results, err := r.filter(ctx, state, prepared, candidates)
	if err != nil {
		return nil, err
	}
	placement := &ScheduleResult{Results: results}
	for i := range results {
		if !results[i].Fits {
			continue
		}
		node := results[i].Node
		st, err := r.reserve(ctx, state, prepared, node)
		if err != nil {
			return nil, err
		}
		if !st.IsSuccess() {
			results[i].reject(st)
			logger.V(4).Info("Reserve failed, trying next node", "pod", klog.KObj(pod), "node", node, "plugin", st.Plugin(), "reason", st.Message())
			continue
		}
		placed, err := r.bind(prepared, info, node)
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

// reserve runs the Reserve plugins on node, and Unreserve when they fail;
// a panic among them becomes an error naming the pod and node.
func (r *Runner) reserve(ctx context.Context, state *schedframework.CycleState, pod *v1.Pod, node string) (st *fwk.Status, err error) {
	defer recoverPlugin(pod, node, &err)
	if st = r.fw.RunReservePluginsReserve(ctx, state, pod, node); !st.IsSuccess() {
		r.fw.RunReservePluginsUnreserve(ctx, state, pod, node)
	}
	return st, nil
}

// bind applies what PreBind and the binder would: allocations signalled
// in Reserve become claim status, every claim of the pod gets the pod in
// reservedFor, and the pod lands on the node. info, when not nil, is the
// PodInfo of the pod pod was prepared from. Claims are copied shallowly,
// changed fields only: stored objects are never modified, so the copies
// may share the rest.
func (r *Runner) bind(pod *v1.Pod, info fwk.PodInfo, node string) (*v1.Pod, error) {
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
		claim, ok := r.snap.ResourceClaim(pod.Namespace, *name)
		if !ok {
			return nil, fmt.Errorf("claim %s after reserve: not in the snapshot", *name)
		}
		reserved, err := withReservation(pod, r.GroupClaimOwner(pod, podClaim), podClaim, claim)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", *name, err)
		}
		if reserved == claim {
			continue
		}
		if err := r.snap.SetResourceClaim(reserved); err != nil {
			return nil, fmt.Errorf("reserve claim %s: %w", claim.Name, err)
		}
	}
	var err error
	if info != nil {
		err = r.snap.AddPodCopy(pod, node, info)
	} else {
		err = r.snap.AddPod(pod, node)
	}
	if err != nil {
		return nil, err
	}
	placed, ok := r.snap.PlacedPod(pod.Namespace, pod.Name)
	if !ok || placed.Spec.NodeName != node {
		return nil, fmt.Errorf("pod %s/%s not found on %s after adding it", pod.Namespace, pod.Name, node)
	}
	return placed, nil
}

// withReservation returns claim with pod in reservedFor, claim itself when
// the pod is there already. A PodGroup's claim (pg, nil for the pod's own
// claims) is reserved for the PodGroup, as the DRA plugin reserves it.
func withReservation(pod *v1.Pod, pg *schedulingv1beta1.PodGroup, podClaim *v1.PodResourceClaim, claim *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	binding, err := resourceclaim.BindTo(pod, pg, podClaim)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(claim.Status.ReservedFor, func(c resourceapi.ResourceClaimConsumerReference) bool { return c.UID == binding.UID }) {
		return claim, nil
	}
	c := *claim
	c.Status.ReservedFor = append(slices.Clip(claim.Status.ReservedFor), binding)
	return &c, nil
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
// then: it gets a name the way the API server would generate it. The pod's
// own claims get the pod in reservedFor right away, so that bind stores
// each claim once.
func (r *Runner) allocatedClaim(pod *v1.Pod, inflight *resourceapi.ResourceClaim) (*resourceapi.ResourceClaim, error) {
	var c resourceapi.ResourceClaim
	if inflight.Name == specialClaimName {
		c = *inflight
		c.Name = r.freeName(pod.Namespace, c.GenerateName, string(pod.UID)+"/extended-resources")
		c.UID = simulatedUID(pod.Namespace, c.Name)
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	} else {
		stored, ok := r.snap.ResourceClaim(inflight.Namespace, inflight.Name)
		if !ok {
			return nil, fmt.Errorf("in-flight claim %s: not in the snapshot", inflight.Name)
		}
		// The in-flight claim is held by the snapshot, read-only like
		// every stored object: its allocation can be shared.
		c = *stored
		c.Status.Allocation = inflight.Status.Allocation
	}
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		c.Finalizers = append(slices.Clip(c.Finalizers), resourceapi.Finalizer)
	}
	if inflight.Name == specialClaimName {
		return &c, nil
	}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		if name, _, err := resourceclaim.Name(pod, podClaim); err == nil && name != nil && *name == c.Name {
			return withReservation(pod, r.GroupClaimOwner(pod, podClaim), podClaim, &c)
		}
	}
	return &c, nil
}

// closeFork ends the fork a scheduling cycle opened: committed when the
// pod is kept, reverted otherwise. A failure to close it becomes *err
// unless the cycle already failed.
func (r *Runner) closeFork(keep bool, err *error) {
	end := r.snap.Revert
	if keep {
		end = r.snap.Commit
	}
	if eerr := end(); eerr != nil && *err == nil {
		*err = fmt.Errorf("close snapshot fork: %w", eerr)
	}
}
