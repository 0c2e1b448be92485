package estimator

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// slot is a framework placement in a form that can be copied to another
// node: per pod claim (nil when the pod needs no claim for it), the
// allocation with its devices' pools named as in the template.
type slot struct {
	claims []*slotClaim
}

type slotClaim struct {
	alloc *resourceapi.AllocationResult
	pools []string // template pool of each result, same index
}

// captureSlot turns the placement of placedPod on n into a slot, if it can
// be copied exactly: every claim of the pod allocated for this pod alone,
// pinned to n by name, with devices only from n's own pools, and no claim
// made for the pod beyond its template claims (the DRA extended-resource
// claim, for one, is not copied). A driver that also publishes pools for
// several nodes disqualifies the copy: the allocator tries pools in name
// order, and a shared pool's name can sort before one node's pools and
// after another's, so the same request may land differently.
func (r *run) captureSlot(placedPod *v1.Pod, n *hnode) (*slot, bool) {
	allocs, ok := pinnedAllocations(r.snap, placedPod, n.name)
	if !ok {
		return nil, false
	}
	s := &slot{claims: make([]*slotClaim, len(allocs))}
	for i, alloc := range allocs {
		if alloc == nil {
			continue
		}
		sc := &slotClaim{alloc: alloc, pools: make([]string, len(alloc.Devices.Results))}
		for k, res := range alloc.Devices.Results {
			pool, ok := r.templatePool(res.Driver, res.Pool, n.name)
			if !ok || r.sharedDriver(res.Driver) {
				return nil, false
			}
			sc.pools[k] = pool
		}
		s.claims[i] = sc
	}
	return s, true
}

// pinnedAllocations returns, per pod claim of placed (the pod as placed,
// its claim statuses set), the allocation its claim got, nil for a pod
// claim that needs no claim. ok is false unless every claim is allocated
// for this pod alone and pinned to node by name, and the pod owns no
// claim beyond its pod claims (the DRA extended-resource claim, for one).
func pinnedAllocations(snap *snapshot.Snapshot, placed *v1.Pod, node string) ([]*resourceapi.AllocationResult, bool) {
	allocs := make([]*resourceapi.AllocationResult, len(placed.Spec.ResourceClaims))
	names := make(map[string]bool, len(placed.Spec.ResourceClaims))
	for i := range placed.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(placed, &placed.Spec.ResourceClaims[i])
		if err != nil {
			return nil, false
		}
		if name == nil {
			continue
		}
		names[*name] = true
		claim, err := snap.ResourceClaims().Get(placed.Namespace, *name)
		if err != nil {
			return nil, false
		}
		alloc := claim.Status.Allocation
		if alloc == nil || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != placed.UID ||
			!pinnedTo(alloc.NodeSelector, node) {
			return nil, false
		}
		allocs[i] = alloc
	}
	for _, c := range snap.ClaimsOwnedBy(placed.UID) {
		if !names[c.Name] {
			return nil, false
		}
	}
	return allocs, true
}

// sharedDriver reports whether driver publishes slices not bound to one
// node.
func (r *run) sharedDriver(driver string) bool {
	if r.sharedDrivers == nil {
		list, err := r.snap.ResourceSlices().ListWithDeviceTaintRules()
		if err != nil {
			return true // unknown: do not copy
		}
		r.sharedDrivers = map[string]bool{}
		for _, s := range list {
			if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
				r.sharedDrivers[s.Spec.Driver] = true
			}
		}
	}
	return r.sharedDrivers[driver]
}

// templatePool returns the template pool that became pool on node, if pool
// is one of node's own.
func (r *run) templatePool(driver, pool, node string) (string, bool) {
	for _, s := range r.tmpl.ResourceSlices {
		if s.Spec.Driver == driver && template.PoolName(r.tmpl.Node.Name, s.Spec.Pool.Name, node) == pool {
			return s.Spec.Pool.Name, true
		}
	}
	return "", false
}

// pinnedTo reports the node selector the allocator gives allocations of
// node-local devices: exactly the node, by name.
func pinnedTo(sel *v1.NodeSelector, node string) bool {
	return snapshot.PinnedNode(sel) == node && node != ""
}

// pendingCopy is a copied placement not written yet.
type pendingCopy struct {
	pi   *schedframework.PodInfo
	slot *slot
}

// clone places pod on n by copying a memoized placement. On a virtual node
// the copy waits until the node is materialised (lazy.go).
func (r *run) clone(pi *schedframework.PodInfo, n *hnode, t *transition) error {
	r.res.Placements = append(r.res.Placements, Placement{Pod: pi.Pod, Node: n.name})
	n.state = t.next
	if from := idOf(n.used); t.usedAfter != nil && t.usedFrom == from {
		n.used = t.usedAfter
	} else {
		n.used = slices.Clip(n.used) // not written in place: it may be shared
		for _, sc := range t.slot.claims {
			if sc == nil {
				continue
			}
			for k, res := range sc.alloc.Devices.Results {
				n.use(usedDevice{res.Driver, sc.pools[k], res.Device})
			}
		}
		n.used = slices.Clip(n.used)
		t.usedFrom, t.usedAfter = from, n.used
	}
	if n.virtual {
		n.pending = append(n.pending, pendingCopy{pi: pi, slot: t.slot})
		return nil
	}
	return r.writeCopy(pi, t.slot, n)
}

// writeCopy writes a copied placement: the pod's claims (made from their
// templates as the framework would make them) get the slot's allocations
// on n's pools and the pod in reservedFor, then the pod joins the node,
// all through the snapshot's normal API so the allocated-device state
// follows. The result is what SchedulePod would have produced
// (TestMemoIsExact).
func (r *run) writeCopy(pi *schedframework.PodInfo, s *slot, n *hnode) error {
	pod := pi.Pod
	placed := pod
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		sc := s.claims[i]
		claim, made, err := claimFor(r.e.runner, placed, podClaim)
		if err != nil {
			return fmt.Errorf("copy placement of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if (claim == nil) != (sc == nil) {
			return fmt.Errorf("copy placement of pod %s/%s: claim %s does not match the memoized placement", pod.Namespace, pod.Name, podClaim.Name)
		}
		if claim == nil {
			continue
		}
		if err := r.snap.SetResourceClaim(r.allocatedCopy(claim, made, sc, n, pod)); err != nil {
			return fmt.Errorf("copy placement of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if made {
			if placed == pod {
				cp := *pod
				cp.Status.ResourceClaimStatuses = slices.Clip(pod.Status.ResourceClaimStatuses)
				placed = &cp
			}
			name := claim.Name
			placed.Status.ResourceClaimStatuses = append(placed.Status.ResourceClaimStatuses,
				v1.PodResourceClaimStatus{Name: podClaim.Name, ResourceClaimName: &name})
		}
	}
	if err := r.snap.AddPodCopy(placed, n.name, pi); err != nil {
		return fmt.Errorf("copy placement of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// allocatedCopy returns claim as the framework leaves it after binding pod
// on n: defaulted, with the DRA finalizer, the slot's allocation moved to
// n's pools and node, and pod in reservedFor. Only what changes is copied;
// a claim just made from its template (made) is changed in place.
func (r *run) allocatedCopy(claim *resourceapi.ResourceClaim, made bool, sc *slotClaim, n *hnode, pod *v1.Pod) *resourceapi.ResourceClaim {
	return allocatedCopyOf(claim, made, sc.alloc, func(k int) string { return template.PoolName(r.tmpl.Node.Name, sc.pools[k], n.name) },
		r.nodeSelector(n), pod)
}

// allocatedCopyOf is claim as the framework leaves it after binding pod
// with src's allocation, its k-th device taken from pool(k) and the
// allocation pinned by sel. A claim just made (claimFor's made: a new
// object no one else holds) is changed in place rather than copied: a
// kept estimate makes one per pod.
func allocatedCopyOf(claim *resourceapi.ResourceClaim, made bool, src *resourceapi.AllocationResult, pool func(k int) string, sel *v1.NodeSelector,
	pod *v1.Pod) *resourceapi.ResourceClaim {
	c := claim
	if !made {
		cp := *claim
		c = &cp
	}
	c.Spec = framework.DefaultedSpec(claim)
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		c.Finalizers = append(slices.Clip(c.Finalizers), resourceapi.Finalizer)
	}
	alloc := *src
	alloc.NodeSelector = sel
	alloc.Devices.Results = make([]resourceapi.DeviceRequestAllocationResult, len(src.Devices.Results))
	for k, res := range src.Devices.Results {
		res.Pool = pool(k)
		if res.ShareID != nil {
			// The allocator gives every share a fresh ID too.
			id := types.UID(uuid.NewUUID())
			res.ShareID = &id
		}
		alloc.Devices.Results[k] = res
	}
	c.Status.Allocation = &alloc
	c.Status.ReservedFor = append(slices.Clip(c.Status.ReservedFor),
		resourceapi.ResourceClaimConsumerReference{APIGroup: v1.GroupName, Resource: "pods", Name: pod.Name, UID: pod.UID})
	return c
}

// nodeSelector is the allocator's selector for n's devices, shared by all
// claims allocated on n (stored objects are read-only).
func (r *run) nodeSelector(n *hnode) *v1.NodeSelector {
	if n.selector == nil {
		n.selector = &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchFields: []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{n.name}}},
		}}}
	}
	return n.selector
}
