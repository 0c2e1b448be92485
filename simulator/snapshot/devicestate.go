package snapshot

import (
	"cmp"
	"hash/maphash"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// DeviceState is what a node's own devices offer and hold, by identity
// rather than by generation: a Gen never outlives a Reset, so a reader
// that keeps what it computed of each node across passes (the stranded
// capacity of an idle cluster's thousands of nodes) keys it by this. Two
// DeviceStates with the same slice objects and the same prints describe
// the same devices in the same allocation state.
type DeviceState struct {
	// Slices are the node's own slices, DeviceTaintRules applied, in the
	// order the allocator lists them. An informer hands out a new object
	// for every change, so the same objects are the same content.
	Slices []*resourceapi.ResourceSlice
	// Node prints the allocations pinned to the node (PinnedNode), Shared
	// all others: together, every allocation that may hold one of the
	// node's devices.
	Node, Shared AllocPrint
}

// AllocPrint is a fingerprint of a multiset of allocated devices (device,
// share and consumed capacity, as the allocated-device index counts
// them), kept up to date allocation by allocation: a sum of each result's
// hash and a sum of a remix of it, 128 bits in all.
type AllocPrint struct{ sum, mix uint64 }

// DeviceState returns node's DeviceState.
func (s *Snapshot) DeviceState(node string) DeviceState {
	return DeviceState{Slices: s.nodeSlices(node), Node: s.prints[node], Shared: s.prints[""]}
}

// nodeSlices lists node's own slices in the listers' order.
func (s *Snapshot) nodeSlices(node string) []*resourceapi.ResourceSlice {
	names := s.slicesOfNode[node]
	if len(names) == 0 {
		return nil
	}
	l := s.patchedSlices
	out := make([]*resourceapi.ResourceSlice, 0, len(names))
	for name := range names {
		out = append(out, l.items[l.pos[name]])
	}
	slices.SortFunc(out, func(a, b *resourceapi.ResourceSlice) int { return cmp.Compare(l.pos[a.Name], l.pos[b.Name]) })
	return out
}

// add counts one more result of hash h.
func (p *AllocPrint) add(h uint64) {
	p.sum += h
	p.mix += remix(h)
}

// apply adds (sign > 0) or takes away an allocation's print d.
func (p AllocPrint) apply(d AllocPrint, sign int) AllocPrint {
	if sign < 0 {
		return AllocPrint{p.sum - d.sum, p.mix - d.mix}
	}
	return AllocPrint{p.sum + d.sum, p.mix + d.mix}
}

var printSeed = maphash.MakeSeed()

// resultHash hashes what an allocation result holds: the device, and with
// consumable capacity its share and what the share consumes.
func resultHash(r *resourceapi.DeviceRequestAllocationResult, consumable bool) uint64 {
	h := maphash.String(printSeed, r.Driver)
	h = remix(h ^ maphash.String(printSeed, r.Pool))
	h = remix(h ^ maphash.String(printSeed, r.Device))
	if consumable && r.ShareID != nil {
		h = remix(h ^ maphash.String(printSeed, string(*r.ShareID)) ^ 1)
		for _, name := range slices.Sorted(maps.Keys(r.ConsumedCapacity)) {
			q := r.ConsumedCapacity[name]
			h = remix(h ^ maphash.String(printSeed, string(name)+"="+q.String()))
		}
	}
	return h
}

// remix is splitmix64's finaliser: the second sum adds what the first
// cannot tell apart (two multisets whose hashes sum alike).
func remix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
