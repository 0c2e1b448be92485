package estimator

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Copying a placement between existing nodes that look alike.
//
// Two nodes with equal NodeKeys keys offer the DRA allocator the same
// devices in the same state, each in a pool named after its node, and
// every other filter the same node (see NodeKeys). The allocator is
// deterministic: it gives a pod of a memoizable, keyable class the same
// devices on either node. So a placement the framework made on one node
// is copied to the other the way the estimator copies placements between
// its new nodes (clone.go): the pod's claims, made as the framework makes
// them, get the same allocation from the other node's pool, pinned to
// that node, with the pod in reservedFor, and the pod joins the node.
// TestCopyPlacementIsExact compares the snapshot after a copy with the
// one the framework leaves.

// NodePlacement is a placement the framework made on an existing node,
// in a form that can be copied to another node of the same key.
type NodePlacement struct {
	// allocs holds, per pod claim, the allocation its claim got; nil
	// for a pod claim that needed no claim.
	allocs []*resourceapi.AllocationResult
}

// CapturePlacement returns the placement of placed (the pod as placed,
// its claim statuses set) on node. ok is false when a copy would not be
// exact: a claim not allocated for this pod alone, not pinned to node by
// name, or with a device from another pool than the node's own (named
// after the node) or shared between claims; or a claim made for the pod
// beyond its pod claims (the DRA extended-resource claim, for one).
func (e *Estimator) CapturePlacement(placed *v1.Pod, node string) (*NodePlacement, bool) {
	allocs, ok := pinnedAllocations(e.runner.Snapshot(), placed, node)
	if !ok {
		return nil, false
	}
	for _, alloc := range allocs {
		if alloc == nil {
			continue
		}
		for _, res := range alloc.Devices.Results {
			if res.Pool != node || res.ShareID != nil || len(res.ConsumedCapacity) > 0 {
				return nil, false
			}
		}
	}
	return &NodePlacement{allocs: allocs}, true
}

// CopyPlacement places pod on node as p says, p having been captured on a
// node whose key before that placement is node's key now, and returns
// true; info (may be nil) is the pod's PodInfo. It returns false, having
// changed nothing, when the framework's way may differ: a claim is still
// to be made from its template while the pod owns claims already (the
// framework looks among them for the one to take), a claim of the pod is
// allocated or reserved already, or the claims do not match p's. A claim
// made already and named in the pod's status (a pod moved off a node
// scale-down removes, its claim released) is allocated as the framework
// allocates it: the DRA plugin reads it by that name.
func (e *Estimator) CopyPlacement(pod *v1.Pod, info fwk.PodInfo, p *NodePlacement, node string) (bool, error) {
	snap := e.runner.Snapshot()
	if p == nil || len(p.allocs) != len(pod.Spec.ResourceClaims) || (toMake(pod) && len(snap.ClaimsOwnedBy(pod.UID)) > 0) {
		return false, nil
	}
	claims := make([]*resourceapi.ResourceClaim, len(pod.Spec.ResourceClaims))
	made := make([]bool, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		claim, m, err := claimFor(e.runner, pod, &pod.Spec.ResourceClaims[i])
		if err != nil || (claim == nil) != (p.allocs[i] == nil) {
			return false, nil
		}
		if claim != nil && !m && (claim.Status.Allocation != nil || len(claim.Status.ReservedFor) > 0) {
			return false, nil
		}
		claims[i], made[i] = claim, m
	}
	sel := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	pool := func(int) string { return node }
	placed := pod
	for i, claim := range claims {
		if claim == nil {
			continue
		}
		if err := snap.SetResourceClaim(allocatedCopyOf(claim, made[i], p.allocs[i], pool, sel, pod)); err != nil {
			return false, err
		}
		if made[i] {
			if placed == pod {
				cp := *pod
				cp.Status.ResourceClaimStatuses = append([]v1.PodResourceClaimStatus(nil), pod.Status.ResourceClaimStatuses...)
				placed = &cp
			}
			name := claim.Name
			placed.Status.ResourceClaimStatuses = append(placed.Status.ResourceClaimStatuses,
				v1.PodResourceClaimStatus{Name: pod.Spec.ResourceClaims[i].Name, ResourceClaimName: &name})
		}
	}
	var err error
	if info != nil && info.GetPod() != nil && info.GetPod().UID == pod.UID {
		err = snap.AddPodCopy(placed, node, info)
	} else {
		err = snap.AddPod(placed, node)
	}
	return err == nil, err
}

// toMake reports a claim of pod still to be made from its template.
func toMake(pod *v1.Pod) bool {
	for i := range pod.Spec.ResourceClaims {
		if framework.ClaimNotMadeYet(pod, &pod.Spec.ResourceClaims[i]) {
			return true
		}
	}
	return false
}

// Same reports whether two placements, each captured on its own node,
// took the same devices of their nodes for the same requests: what a
// copy of one to the other's node would have allocated is what the
// framework did.
func (p *NodePlacement) Same(q *NodePlacement) bool {
	if p == nil || q == nil || len(p.allocs) != len(q.allocs) {
		return p == q
	}
	for i, a := range p.allocs {
		b := q.allocs[i]
		if (a == nil) != (b == nil) {
			return false
		}
		if a == nil {
			continue
		}
		if len(a.Devices.Results) != len(b.Devices.Results) || !apiequality.Semantic.DeepEqual(a.Devices.Config, b.Devices.Config) {
			return false
		}
		for k, ra := range a.Devices.Results {
			rb := b.Devices.Results[k]
			ra.Pool, rb.Pool = "", "" // each its own node's pool
			if !apiequality.Semantic.DeepEqual(ra, rb) {
				return false
			}
		}
	}
	return true
}
