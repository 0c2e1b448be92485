package estimator

import (
	"context"

	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// scheduleScoped runs one framework cycle for pi over candidates, new
// nodes of the estimate, with the snapshot's slices scoped to them
// (snapshot.ScopeSlices).
//
// Why: each scheduling cycle of a pod with claims builds a DRA allocator
// over every listed slice (structured.NewAllocator indexes them by node),
// which on a cluster of 1,000 GPU nodes costs more than the rest of the
// cycle together, while only the candidates matter here.
//
// Why the answers do not change: the allocator decides for a node from
// that node's slices and the slices not bound to any node; a pool of
// another node only matters to it when it shares the pool's ID, and the
// pools of new nodes are named after them (template.Instantiate) and new
// node names are never names in the snapshot. (This replaced removing
// other nodes' slices in a fork for the whole estimate, which cost
// O(slices) per estimate and still listed every new node's slices.)
func (r *run) scheduleScoped(ctx context.Context, pi *schedframework.PodInfo, candidates []string) (*framework.ScheduleResult, error) {
	r.calls++
	r.snap.ScopeSlices(candidates)
	defer r.snap.ScopeSlices(nil)
	return r.e.runner.SchedulePodInfo(ctx, pi, candidates)
}
