package framework

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// maxChunk bounds the chunks FilterUntil and SchedulePodFirstFit filter
// in one cycle.
const maxChunk = 64

// chunks calls fn on consecutive chunks of nodes, first of size first,
// then doubling up to maxChunk, until fn says stop. Each chunk is a cycle
// of its own (PreFilter, Filter) with the slices scoped to the chunk, as
// the estimator scopes them: the DRA PreFilter then indexes the chunk's
// slices, not the cluster's, so a search that stops early costs what it
// filtered. The caller's scope is put back afterwards.
func (r *Runner) chunks(nodes []string, first int, fn func(chunk []string) (stop bool, err error)) error {
	return r.chunksPast(nodes, first, nil, fn)
}

// chunksPast is chunks whose sizes count only the nodes known does not
// name (nil: every node): nodes a memo answers for cost no Filter, so a
// run of them neither grows the chunks that follow it nor enters the
// slice scope (a chunk may span thousands of them; the DRA PreFilter
// would index all their slices).
func (r *Runner) chunksPast(nodes []string, first int, known func(node string) bool, fn func(chunk []string) (stop bool, err error)) error {
	prev := r.snap.SliceScope()
	defer r.snap.ScopeSlices(prev)
	size := max(first, 1)
	var asked []string
	for start := 0; start < len(nodes); {
		end := min(start+size, len(nodes))
		scope := nodes[start:end]
		if known != nil {
			asked = asked[:0]
			for end = start; end < len(nodes) && len(asked) < size; end++ {
				if !known(nodes[end]) {
					asked = append(asked, nodes[end])
				}
			}
			scope = asked
		}
		r.snap.ScopeSlices(scope)
		stop, err := fn(nodes[start:end])
		if err != nil || stop {
			return err
		}
		start, size = end, min(2*size, maxChunk)
	}
	return nil
}

// FilterUntil is RunFilters that stops once enough nodes fit (enough <= 0:
// never): nodes are filtered in their order, in chunks (see chunks), and
// the verdicts of the nodes filtered, a prefix of nodes, come back in that
// order. Like the scheduler's search for numFeasibleNodesToFind, it may
// filter a few nodes past the enough-th fit (the rest of its chunk). Each
// chunk honours its PreFilter's node set, as RunFilters does.
func (r *Runner) FilterUntil(ctx context.Context, pod *v1.Pod, nodes []string, enough int) (results []NodeResult, err error) {
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("revert snapshot after filtering: %w", rerr)
		}
	}()
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("filter pod: %w", err)
	}
	fits := 0
	err = r.chunks(nodes, minParallelNodes, func(chunk []string) (bool, error) {
		res, err := r.filter(ctx, schedframework.NewCycleState(), prepared, chunk)
		if err != nil {
			return true, err
		}
		for i := range res {
			if res[i].Fits {
				fits++
			}
		}
		results = append(results, res...)
		return enough > 0 && fits >= enough, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// SchedulePodFirstFit is SchedulePod that stops at the first candidate,
// in the given order, where the pod fits and reserves: the same node
// SchedulePod picks, found by filtering in chunks (see chunks), the first
// of one node (a ranked order's first node is usually known to fit).
// Results hold the verdicts of the candidates filtered, a prefix of
// candidates.
func (r *Runner) SchedulePodFirstFit(ctx context.Context, pod *v1.Pod, candidates []string) (*ScheduleResult, error) {
	return r.schedulePodFirstFit(ctx, pod, nil, candidates)
}

// SchedulePodInfoFirstFit is SchedulePodFirstFit for a pod whose PodInfo
// the caller keeps (see SchedulePodInfo): the placed pod shares it.
func (r *Runner) SchedulePodInfoFirstFit(ctx context.Context, info fwk.PodInfo, candidates []string) (*ScheduleResult, error) {
	if info == nil {
		return nil, fmt.Errorf("schedule pod: nil pod info")
	}
	return r.schedulePodFirstFit(ctx, info.GetPod(), info, candidates)
}

// SchedulePodFirstFitKnown is SchedulePodFirstFit that reads the nodes
// known to turn pod's class down from a's memo (Alike.Class,
// Alike.Rejected) instead of filtering them, and remembers the nodes the
// Filter plugins turn down; a nil a, or a pod without a class, is plain
// SchedulePodFirstFit. The caller keeps the memo true: a kept verdict
// holds while the node's generation does only if nothing else the class's
// verdict reads changes in between. With a.Verify the known nodes are
// filtered anyway and a difference reported through a.Found.
func (r *Runner) SchedulePodFirstFitKnown(ctx context.Context, pod *v1.Pod, candidates []string, a *Alike) (*ScheduleResult, error) {
	return r.schedulePodFirstFitIn(ctx, schedframework.NewCycleState, pod, nil, candidates, a.known(pod))
}

func (r *Runner) schedulePodFirstFit(ctx context.Context, pod *v1.Pod, info fwk.PodInfo, candidates []string) (*ScheduleResult, error) {
	return r.schedulePodFirstFitIn(ctx, schedframework.NewCycleState, pod, info, candidates, nil)
}

// schedulePodFirstFitIn is schedulePodFirstFit with each chunk's cycle
// state made by newState: a pod group cycle's carry its group and
// placement states. Nodes known answers for are passed over without
// counting them in the chunks' sizes (chunksPast).
func (r *Runner) schedulePodFirstFitIn(ctx context.Context, newState func() *schedframework.CycleState, pod *v1.Pod, info fwk.PodInfo,
	candidates []string, known *knownRejections) (_ *ScheduleResult, err error) {
	logger := klog.FromContext(ctx)
	r.snap.Fork()
	keep := false
	defer func() { r.closeFork(keep, &err) }()
	defer recoverPlugin(pod, "", &err)
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("schedule pod: %w", err)
	}
	placement := &ScheduleResult{}
	err = r.chunksPast(candidates, 1, known.has(r), func(chunk []string) (bool, error) {
		state := newState()
		results, err := r.filterKnown(ctx, state, prepared, chunk, known)
		if err != nil {
			return true, err
		}
		first := len(placement.Results)
		placement.Results = append(placement.Results, results...)
		for i := range results {
			if !results[i].Fits {
				continue
			}
			node := results[i].Node
			st, err := r.reserve(ctx, state, prepared, node)
			if err != nil {
				return true, err
			}
			if !st.IsSuccess() {
				placement.Results[first+i].reject(st)
				logger.V(4).Info("Reserve failed, trying next node", "pod", klog.KObj(pod), "node", node, "plugin", st.Plugin(), "reason", st.Message())
				continue
			}
			placed, err := r.bind(prepared, info, node)
			if err != nil {
				return true, fmt.Errorf("schedule pod %s/%s on %s: %w", pod.Namespace, pod.Name, node, err)
			}
			placement.Node, placement.Pod = node, placed
			keep = true
			logger.V(4).Info("Simulated placement", "pod", klog.KObj(pod), "node", node)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if !keep {
		logger.V(4).Info("Pod fits on no candidate", "pod", klog.KObj(pod), "candidates", len(candidates))
	}
	return placement, nil
}
