package estimator

import (
	"fmt"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// hideOtherNodesSlices removes, inside the caller's fork, every
// ResourceSlice published for a particular node, so that the estimate's
// framework calls list only the slices of the new nodes and the ones not
// bound to a node.
//
// Why: each scheduling cycle of a pod with claims builds a DRA allocator
// over every listed slice (structured.NewAllocator indexes them by node),
// which on a cluster of 1,000 GPU nodes costs more than the rest of the
// cycle together, while only the new nodes are candidates here.
//
// Why the answers do not change: the allocator decides for a node from
// that node's slices and the slices not bound to any node; a pool of
// another node only matters to it when it shares the pool's ID, and the
// pools of new nodes are named after them (template.Instantiate) and new
// node names are never names in the snapshot. The slices come back
// exactly, in order, when the fork is reverted.
//
// It costs O(slices) once per EstimateGroups call, which is why a planner
// should estimate all its groups in one call.
func hideOtherNodesSlices(snap *snapshot.Snapshot) error {
	list, err := snap.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return fmt.Errorf("list resource slices: %w", err)
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			names = append(names, s.Name)
		}
	}
	for _, name := range names {
		if err := snap.RemoveResourceSlice(name); err != nil {
			return fmt.Errorf("scope estimate to new nodes: %w", err)
		}
	}
	return nil
}
