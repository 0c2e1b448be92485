package estimator

import (
	"crypto/sha256"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/lenhash"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// GangKind tells gangs apart by what their pod group cycle reads of the
// gang itself: every group's spec but its names (the parent's, the
// Workload's), how many of its pods are scheduled, and its members'
// classes in order; "" when the members' verdicts are not their nodes'
// alone (a class not memoizable) or the shortcut is off. Two gangs of a
// kind, offered the same nodes in the same state, get the same outcome
// up to names: the alikePlacements rule, turned on gangs rather than on
// placements (the planner replays the runs of one for the next,
// gangStage.replayFor). The caller has checked the rest of that rule:
// AlikePlacements gave the tree an Alike.
func (e *Estimator) GangKind(tree *framework.GroupTree) string {
	if e == nil || !e.on(shortcut.AlikePlacements) {
		return ""
	}
	h := lenhash.Fields{H: sha256.New()}
	if !e.writeKind(&h, tree) {
		return ""
	}
	return string(h.H.Sum(nil))
}

func (e *Estimator) writeKind(h *lenhash.Fields, t *framework.GroupTree) bool {
	var spec []byte
	var err error
	switch {
	case t.Composite != nil:
		s := t.Composite.Spec
		s.ParentCompositePodGroupName, s.WorkloadRef = nil, nil
		spec, err = s.Marshal()
		h.Str("composite")
	case t.PodGroup != nil:
		s := t.PodGroup.Spec
		s.ParentCompositePodGroupName, s.WorkloadRef = nil, nil
		spec, err = s.Marshal()
		h.Str("podGroup")
		state, serr := e.runner.Snapshot().PodGroupStates().Get(t.PodGroup.Namespace, t.PodGroup.Name)
		if serr != nil {
			return false
		}
		h.Ints(int64(state.ScheduledPodsCount()))
	default:
		return false
	}
	if err != nil {
		return false
	}
	h.Bytes(spec)
	h.Ints(int64(len(t.Members)))
	for _, m := range t.Members {
		if !e.Memoizable(m) {
			return false
		}
		h.Str(e.ClassKey(m))
	}
	h.Ints(int64(len(t.Children)))
	for _, c := range t.Children {
		if !e.writeKind(h, c) {
			return false
		}
	}
	return true
}
