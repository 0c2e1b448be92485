package estimator

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// place puts pod on the first node open to its class that takes it, in
// opening order, else on a new node; it closes to the class every node
// found not to take it. Memoized verdicts answer without the framework
// where they can; the rest go to the framework in windows of open nodes,
// leaving out nodes whose state another node of the window stands for.
// When a window holds every node still open to a memoizable class, an
// empty new node rides along at its end: if nothing before it takes the
// pod, that saves the separate call on a new node (the new node cannot
// change the verdicts on the others, see memo.go, and is removed again
// when unused).
func (r *run) place(ctx context.Context, pi *schedframework.PodInfo, cls *class) error {
	if r.perPod || cls.fitsLater {
		cls.reopen()
	}
	cls.refresh(r.nodes)
	defer cls.compact()
	for {
		window, fit, t, exhausted := r.nextWindow(cls)
		if fit != nil {
			return r.clone(pi, fit, t)
		}
		if len(window) == 0 {
			return r.openNode(ctx, pi, cls)
		}
		// When the memo knows the verdict for an empty node, openNode
		// uses it without the framework: nothing rides along then.
		var extra *hnode
		firstFree := r.nextName
		if exhausted && r.memo.usable(cls) && r.mayOpen() && r.memo.peek(stateEmpty, cls) == nil {
			n, err := r.newNode(false)
			if err != nil {
				return err
			}
			extra = n
		}
		done, err := r.schedule(ctx, pi, cls, window, extra, firstFree)
		if err != nil || done {
			return err
		}
	}
}

// nextWindow returns the next nodes to ask the framework about, or a node
// whose memoized verdict is "fits" and comes first. exhausted reports that
// no open node is left out of the window but twins of its nodes.
func (r *run) nextWindow(cls *class) (window []*hnode, fit *hnode, t *transition, exhausted bool) {
	for _, n := range cls.open {
		if cls.closed[n.index] {
			continue
		}
		if t := r.memo.lookup(n.state, cls); t != nil {
			if !t.fits {
				cls.close(n)
				continue
			}
			if len(window) == 0 {
				return nil, n, t, false
			}
			return window, nil, nil, false // decide the unknown nodes before it first
		}
		if r.memo.usable(cls) && n.state != stateUnique && windowHasState(window, n.state) {
			continue // answered by its twin's verdict on the next pass
		}
		if len(window) == maxWindow {
			return window, nil, nil, false
		}
		window = append(window, n)
	}
	return window, nil, nil, true
}

func windowHasState(window []*hnode, state int) bool {
	for _, n := range window {
		if n.state == state {
			return true
		}
	}
	return false
}

// mayOpen reports whether the node limit allows one more node.
func (r *run) mayOpen() bool {
	return r.maxNodes <= 0 || len(r.nodes) < r.maxNodes
}

// schedule runs one framework cycle for pod over window, plus extra (an
// empty node not kept yet) at its end. Nodes that reject the pod are
// closed to its class and the verdict memoized; the node it lands on gets
// its new state memoized when the placement can be copied. done reports
// that the pod was placed, or found unplaceable on extra. An unused extra
// is removed and its name (firstFree on) given back.
func (r *run) schedule(ctx context.Context, pi *schedframework.PodInfo, cls *class, window []*hnode, extra *hnode, firstFree int) (done bool, err error) {
	pod := pi.Pod
	names := make([]string, 0, len(window)+1)
	for _, n := range window {
		if err := r.materialize(n); err != nil {
			return false, err
		}
		names = append(names, n.name)
	}
	if extra != nil {
		names = append(names, extra.name)
	}
	p, err := r.scheduleScoped(ctx, pi, names)
	if err != nil {
		return false, err
	}
	var target *hnode
	for i, res := range p.Results {
		n := extra
		if i < len(window) {
			n = window[i]
		}
		switch {
		case res.Node == p.Node:
			target = n
		case !res.Fits && n == extra:
			r.memo.fail(stateEmpty, cls, res)
		case !res.Fits:
			cls.close(n)
			r.memo.fail(n.state, cls, res)
		}
	}
	if extra != nil && target != extra {
		if err := r.snap.RemoveNode(extra.name); err != nil {
			return false, fmt.Errorf("drop unused node %s: %w", extra.name, err)
		}
		r.nextName = firstFree
	}
	switch {
	case target == nil && extra != nil:
		r.unplaceable(ctx, pod, cls, p.Results[len(p.Results)-1])
		return true, nil
	case target == nil:
		return false, nil
	case target == extra:
		r.keepNode(extra)
		cls.refresh(r.nodes)
	}
	r.placed(pod, cls, target, p.Pod)
	return true, nil
}

// openNode adds a new node for pod, if the limit allows. When the pod
// does not fit on it, the node is dropped again and the pod's whole class
// is unplaceable here.
func (r *run) openNode(ctx context.Context, pi *schedframework.PodInfo, cls *class) error {
	pod := pi.Pod
	if !r.mayOpen() {
		r.res.Limited = LimitMaxNodes
		r.unplaced(pod, noVerdict, LimitMaxNodes)
		return nil
	}
	if t := r.memo.lookup(stateEmpty, cls); t != nil {
		if !t.fits {
			r.unplaceable(ctx, pod, cls, t.verdict)
			return nil
		}
		n, err := r.newNode(r.lazy)
		if err != nil {
			return err
		}
		r.keepNode(n)
		cls.refresh(r.nodes)
		return r.clone(pi, n, t)
	}
	firstFree := r.nextName
	r.snap.Fork()
	n, err := r.newNode(false)
	if err != nil {
		return r.revertWith(err)
	}
	p, err := r.scheduleScoped(ctx, pi, []string{n.name})
	if err != nil {
		return r.revertWith(err)
	}
	if p.Node == "" {
		if err := r.snap.Revert(); err != nil {
			return fmt.Errorf("drop unused node %s: %w", n.name, err)
		}
		r.nextName = firstFree // the name is free again
		verdict := framework.NodeResult{Node: n.name}
		if len(p.Results) > 0 {
			verdict = p.Results[0]
		}
		r.memo.fail(stateEmpty, cls, verdict)
		r.unplaceable(ctx, pod, cls, verdict)
		return nil
	}
	if err := r.snap.Commit(); err != nil {
		return fmt.Errorf("keep node %s: %w", n.name, err)
	}
	r.keepNode(n)
	cls.refresh(r.nodes)
	r.placed(pod, cls, n, p.Pod)
	return nil
}

// unplaceable records that pod's class does not fit an empty node. The
// node, dropped again, is named in the estimate once (droppedNodes), not
// in each pod's verdict: an estimate shared with an alike group is
// renamed per node, not per unplaced pod.
func (r *run) unplaceable(ctx context.Context, pod *v1.Pod, cls *class, verdict framework.NodeResult) {
	if n := verdict.Node; n != "" && !slices.Contains(r.res.droppedNodes, n) {
		r.res.droppedNodes = append(r.res.droppedNodes, n)
	}
	verdict.Node = ""
	if cls.unplaceable == nil && !r.res.nameRead {
		r.res.nameRead = readsNodeNames(pod, r.e.runner.Profile())
	}
	cls.unplaceable = &verdict
	r.unplaced(pod, cls.unplaceable, "")
	klog.FromContext(ctx).V(4).Info("Pod class does not fit an empty node", "pod", klog.KObj(pod), "plugin", verdict.Plugin, "reason", verdict.Message)
}

// unplaced lists pod, the pod being placed, among the estimate's
// unplaced pods (UnplacedPods: a run of the order, not an entry per pod).
func (r *run) unplaced(pod *v1.Pod, result *framework.NodeResult, limit string) {
	if r.at < len(r.order) && r.order[r.at] == pod {
		r.res.Unplaced.add(r.order, r.at, result, limit)
		return
	}
	r.res.Unplaced.addRun([]*v1.Pod{pod}, result, limit)
}
