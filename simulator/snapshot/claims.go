package snapshot

import (
	"fmt"
	"maps"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// inFlightAllocation is an allocation the DRA plugin signalled in Reserve
// but nobody has written into the claim yet (in the scheduler, PreBind
// does; here the simulator does, see the framework runner).
type inFlightAllocation struct {
	claim   *resourceapi.ResourceClaim
	sharers int
}

// SetResourceClaim upserts a claim and moves the allocated-device state
// from the old allocation to the new one.
func (s *Snapshot) SetResourceClaim(claim *resourceapi.ResourceClaim) error {
	if claim == nil {
		return fmt.Errorf("set resource claim: nil claim")
	}
	if err := validName("resource claim", claim.Name); err != nil {
		return fmt.Errorf("set resource claim: %w", err)
	}
	key := nsKey(claim.Namespace, claim.Name)
	// A claim set from outside is the truth: forget any assumed version.
	del(&s.j, s.assumedClaims, key)
	s.storeClaim(key, claim)
	return nil
}

// RemoveResourceClaim deletes a claim and frees what it held.
func (s *Snapshot) RemoveResourceClaim(namespace, name string) error {
	key := nsKey(namespace, name)
	old, ok := s.claims[key]
	if !ok {
		return fmt.Errorf("remove resource claim %s: not in the snapshot", key)
	}
	s.applyAllocation(old.Status.Allocation, -1)
	s.unindexOwner(key, old)
	del(&s.j, s.claims, key)
	del(&s.j, s.assumedClaims, key)
	s.claimList.remove(&s.j, key)
	return nil
}

func (s *Snapshot) storeClaim(key string, claim *resourceapi.ResourceClaim) {
	owner := metav1.GetControllerOfNoCopy(claim)
	old, replaced := s.claims[key]
	// A claim written anew (allocated, released) mostly keeps its owner:
	// its entry in the owner index then stays as it is.
	indexed := replaced && owner != nil && sameOwner(old, owner)
	if replaced {
		s.applyAllocation(old.Status.Allocation, -1)
		if !indexed {
			s.unindexOwner(key, old)
		}
	}
	if owner != nil && !indexed {
		put(&s.j, s.ownerSet(owner.UID), key, sets.Empty{})
	}
	s.readClaim(&claim.Spec)
	put(&s.j, s.claims, key, claim)
	s.claimList.set(&s.j, key, claim)
	s.applyAllocation(claim.Status.Allocation, +1)
}

// sameOwner reports old controlled by owner.
func sameOwner(old *resourceapi.ResourceClaim, owner *metav1.OwnerReference) bool {
	was := metav1.GetControllerOfNoCopy(old)
	return was != nil && was.UID == owner.UID
}

func (s *Snapshot) unindexOwner(key string, claim *resourceapi.ResourceClaim) {
	if owner := metav1.GetControllerOfNoCopy(claim); owner != nil && s.claimsByOwner[owner.UID].Has(key) {
		del(&s.j, s.ownerSet(owner.UID), key)
	}
}

// ownerSet is uid's set in the owner index, made if missing, to write to:
// a set shared with the claim base is copied first (undoably, as inner
// maps are made), so neither writes what the other reads.
func (s *Snapshot) ownerSet(uid types.UID) sets.Set[string] {
	in, ok := s.claimsByOwner[uid]
	if ok && (s.ownerSets == nil || s.ownerSets[uid]) {
		return in
	}
	if ok {
		in = maps.Clone(in)
	} else {
		in = sets.New[string]()
	}
	put(&s.j, s.claimsByOwner, uid, in)
	if s.ownerSets != nil {
		put(&s.j, s.ownerSets, uid, true)
	}
	return in
}

// ClaimsOwnedBy returns the claims controlled by the object with this UID,
// sorted by name.
func (s *Snapshot) ClaimsOwnedBy(uid types.UID) []*resourceapi.ResourceClaim {
	keys := sets.List(s.claimsByOwner[uid])
	out := make([]*resourceapi.ResourceClaim, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.claims[k])
	}
	return out
}

// ResourceClaim returns a claim, if stored.
func (s *Snapshot) ResourceClaim(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	return byName(s.claims, namespace, name)
}

// InFlightClaims returns the claims with a pending allocation, sorted by
// namespace/name.
func (s *Snapshot) InFlightClaims() []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, 0, len(s.inFlight))
	for _, f := range s.inFlight {
		out = append(out, f.claim)
	}
	sort.Slice(out, func(i, k int) bool {
		return nsKey(out[i].Namespace, out[i].Name) < nsKey(out[k].Namespace, out[k].Name)
	})
	return out
}

// ResourceClaims returns the claim tracker.
func (s *Snapshot) ResourceClaims() fwk.ResourceClaimTracker { return claimTracker{s} }

// claimTracker implements fwk.ResourceClaimTracker over the snapshot. Its
// behaviour follows the scheduler's default tracker (dynamicresources
// dra_manager.go), with the snapshot in place of the informer cache.
// It, and the other lister views of the snapshot, are a bare pointer with
// value methods, so that handing one out as an interface allocates
// nothing: plugins ask for them on every call.
type claimTracker struct{ s *Snapshot }

// List returns all claims in insertion order; the slice is shared.
func (t claimTracker) List() ([]*resourceapi.ResourceClaim, error) {
	return t.s.claimList.items, nil
}

// Get returns one claim.
func (t claimTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := byName(t.s.claims, namespace, name); ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceGroup("resourceclaims"), nsKey(namespace, name))
}

// ListAllAllocatedDevices returns the devices held exclusively, including
// in-flight allocations. The set is live: valid until the next mutation.
func (t claimTracker) ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error) {
	return t.s.alloc.dedicated, nil
}

// GatherAllocatedState returns the allocated-device state, including
// in-flight allocations, in O(1). The sets are live: valid until the next
// mutation, and must not be modified (the allocator only reads them).
func (t claimTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	return t.s.alloc.state(), nil
}

// SignalClaimPendingAllocation records an allocation made in Reserve. As in
// the scheduler, a second signal for the same claim only adds a sharer, and
// a claim already allocated in the snapshot gets no in-flight entry.
func (t claimTracker) SignalClaimPendingAllocation(uid types.UID, allocated *resourceapi.ResourceClaim) error {
	s := t.s
	if allocated == nil || allocated.Status.Allocation == nil {
		return fmt.Errorf("signal pending allocation of claim %s: no allocation given", uid)
	}
	if cur, ok := s.inFlight[uid]; ok {
		put(&s.j, s.inFlight, uid, inFlightAllocation{claim: cur.claim, sharers: cur.sharers + 1})
		return nil
	}
	if stored, ok := byName(s.claims, allocated.Namespace, allocated.Name); ok && stored.UID == uid && stored.Status.Allocation != nil {
		s.logger.V(6).Info("Claim is already allocated, not creating in-flight", "claim", klog.KObj(stored))
		return nil
	}
	put(&s.j, s.inFlight, uid, inFlightAllocation{claim: allocated, sharers: 1})
	s.applyAllocation(allocated.Status.Allocation, +1)
	return nil
}

// GetPendingAllocation returns the in-flight allocation of a claim.
func (t claimTracker) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	if f, ok := t.s.inFlight[uid]; ok && f.claim != nil {
		return f.claim.Status.Allocation
	}
	return nil
}

// MaybeRemoveClaimPendingAllocation drops one sharer of an in-flight
// allocation, or the whole entry when forced or when it was the last one.
func (t claimTracker) MaybeRemoveClaimPendingAllocation(uid types.UID, force bool) bool {
	s := t.s
	cur, ok := s.inFlight[uid]
	if !ok {
		return false
	}
	if force || cur.sharers <= 1 {
		del(&s.j, s.inFlight, uid)
		s.applyAllocation(cur.claim.Status.Allocation, -1)
		return true
	}
	put(&s.j, s.inFlight, uid, inFlightAllocation{claim: cur.claim, sharers: cur.sharers - 1})
	return false
}

// AssumeClaimAfterAPICall stores the claim as if the API had accepted the
// change; AssumedClaimRestore brings back the version it replaced.
func (t claimTracker) AssumeClaimAfterAPICall(claim *resourceapi.ResourceClaim) error {
	s := t.s
	if claim == nil {
		return fmt.Errorf("assume claim: nil claim")
	}
	key := nsKey(claim.Namespace, claim.Name)
	old, ok := s.claims[key]
	if !ok {
		return fmt.Errorf("assume claim %s: not in the snapshot", key)
	}
	if _, assumed := s.assumedClaims[key]; !assumed {
		put(&s.j, s.assumedClaims, key, old)
	}
	s.storeClaim(key, claim)
	return nil
}

// AssumedClaimRestore undoes AssumeClaimAfterAPICall.
func (t claimTracker) AssumedClaimRestore(namespace, name string) {
	s := t.s
	key := nsKey(namespace, name)
	orig, ok := s.assumedClaims[key]
	if !ok {
		return
	}
	del(&s.j, s.assumedClaims, key)
	s.storeClaim(key, orig)
}
