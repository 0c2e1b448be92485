package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// allocatedIndex is the allocated-device state the DRA allocator starts
// from, kept up to date claim by claim. The scheduler's own tracker does the
// same from informer events; the upstream cluster autoscaler instead
// re-gathers it from every claim on each PreFilter, which dominates its
// DRA scale-up time. Every write goes through the journal, so forks revert
// it with the rest of the snapshot.
//
// Sets are reference counted: a device named by two allocations (a claim
// both allocated and still pending, or inconsistent input) stays allocated
// until both are gone. The Refs maps count the names beyond the first
// (refInc), so they are empty but for such devices.
type allocatedIndex struct {
	dedicated     sets.Set[structured.DeviceID]
	dedicatedRefs map[structured.DeviceID]int
	shared        sets.Set[structured.SharedDeviceID]
	sharedRefs    map[structured.SharedDeviceID]int
	// capacity values are never modified in place, only replaced, so a
	// state handed to an allocator keeps its numbers.
	capacity structured.ConsumedCapacityCollection
}

func newAllocatedIndex() allocatedIndex {
	return allocatedIndex{
		dedicated:     sets.New[structured.DeviceID](),
		dedicatedRefs: map[structured.DeviceID]int{},
		shared:        sets.New[structured.SharedDeviceID](),
		sharedRefs:    map[structured.SharedDeviceID]int{},
		capacity:      structured.NewConsumedCapacityCollection(),
	}
}

// state returns the index as the allocator's input. The sets are live.
func (a *allocatedIndex) state() *structured.AllocatedState {
	return &structured.AllocatedState{
		AllocatedDevices:         a.dedicated,
		AllocatedSharedDeviceIDs: a.shared,
		AggregatedCapacity:       a.capacity,
	}
}

// apply adds (sign > 0) or removes (sign < 0) what an allocation holds. It
// mirrors foreachAllocatedDevice of the scheduler's DRA plugin: admin-access
// results hold nothing; with consumable capacity, results with a share ID
// hold a share and their consumed capacity; everything else holds the whole
// device.
//
// It returns the print of what the allocation holds (see AllocPrint), so
// that the results are read once.
func (a *allocatedIndex) apply(j *journal, alloc *resourceapi.AllocationResult, sign int, consumable bool) (held AllocPrint) {
	if alloc == nil {
		return
	}
	for i := range alloc.Devices.Results {
		r := &alloc.Devices.Results[i]
		if ptr.Deref(r.AdminAccess, false) {
			continue
		}
		held.add(resultHash(r, consumable))
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if consumable && r.ShareID != nil {
			sid := structured.MakeSharedDeviceID(id, r.ShareID)
			if sign > 0 {
				refInc(j, a.sharedRefs, a.shared, sid)
			} else {
				refDec(j, a.sharedRefs, a.shared, sid)
			}
			if r.ConsumedCapacity != nil {
				a.applyCapacity(j, structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity), sign)
			}
			continue
		}
		if sign > 0 {
			refInc(j, a.dedicatedRefs, a.dedicated, id)
		} else {
			refDec(j, a.dedicatedRefs, a.dedicated, id)
		}
	}
	return held
}

// applyCapacity adds or subtracts consumed capacity of one device, dropping
// the entry when it reaches zero, like ConsumedCapacityCollection.Remove.
func (a *allocatedIndex) applyCapacity(j *journal, c structured.DeviceConsumedCapacity, sign int) {
	cur, ok := a.capacity[c.DeviceID]
	if !ok && sign < 0 {
		return
	}
	next := structured.ConsumedCapacity{}
	if ok {
		next = cur.Clone()
	}
	if sign > 0 {
		next.Add(c.ConsumedCapacity)
	} else {
		next.Sub(c.ConsumedCapacity)
	}
	if sign < 0 && next.Empty() {
		del(j, a.capacity, c.DeviceID)
		return
	}
	put(j, a.capacity, c.DeviceID, next)
}
