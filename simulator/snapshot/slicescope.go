package snapshot

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// ScopeSlices sets or (nil) lifts the slice scope.
//
// Why a scope: the DRA plugin builds an allocator over every listed slice
// in each PreFilter (indexing them by node), which on a cluster of a
// thousand GPU nodes costs more than the rest of a cycle that only asks
// about a few nodes. The scope lists just what those nodes' allocations
// can read: their own slices and the ones not bound to any node.
func (s *Snapshot) ScopeSlices(nodes []string) {
	if nodes == nil {
		s.sliceScope = nil
		return
	}
	s.sliceScope = slices.Clone(nodes)
}

// scopedSlices lists the slices in scope, in the order of the full list.
// It builds a new list on each call, so that it needs no invalidation when
// slices change and concurrent readers share nothing mutable.
func (s *Snapshot) scopedSlices() []*resourceapi.ResourceSlice {
	var at []int
	add := func(node string) {
		for name := range s.slicesOfNode[node] {
			at = append(at, s.patchedSlices.pos[name])
		}
	}
	for _, node := range s.sliceScope {
		add(node)
	}
	add("")
	slices.Sort(at)
	at = slices.Compact(at) // a node named twice
	out := make([]*resourceapi.ResourceSlice, len(at))
	for i, k := range at {
		out[i] = s.patchedSlices.items[k]
	}
	return out
}

// sliceNode is the node a slice is published for, "" when it is not bound
// to one node (allNodes, a node selector, or per-device selection).
func sliceNode(slice *resourceapi.ResourceSlice) string {
	return ptr.Deref(slice.Spec.NodeName, "")
}

// SliceScope returns the current scope (nil: none), for a caller that
// narrows it for a while and then puts it back.
func (s *Snapshot) SliceScope() []string { return s.sliceScope }
