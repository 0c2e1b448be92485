package estimator

import (
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// The memo is what makes an estimate cost O(classes × node states) rather
// than O(pods × nodes) framework calls.
//
// Every hypothetical node starts as an empty instance of the template
// (state stateEmpty). Placing a pod of class C on a node in state S gives
// a new content; when the placement can be copied (see captureSlot), that
// content gets a state id of its own, the same for every node that goes
// through the same sequence of (state, class) steps. The memo stores, per
// (state, class), the verdict: "does not fit, because ..." or "fits, and
// this is the placement (the pod's claim allocations relative to the
// node), leading to state S'".
//
// Why reusing a verdict is exact, for memoizable classes only (no
// inter-pod affinity or topology spread, no volumes claimed across nodes,
// no members of groups that own claims, no claims shared with other
// pods):
//   - nodes in the same state hold the same pods and allocated devices up
//     to renaming, and their devices come from pools of their own, named
//     in the same relative order, so the scheduler's filters and the DRA
//     allocator (deterministic, pools in name order) decide the same way
//     on each;
//   - a copied placement must have drawn only on the node's own pools, so
//     cluster-wide device pools cannot change the answer;
//   - during an estimate resources are only ever taken, never given back,
//     so "does not fit" stays true;
//   - the one cluster-wide effect a placed pod has on other pods' verdicts
//     is required anti-affinity: placing such a pod resets the memo.
//
// TestMemoIsExact checks this by comparing estimates with the memo on and
// off.
type memo struct {
	enabled   bool
	trans     map[transKey]*transition
	nextState int
	hits      int
	// cleared: reset ran, so some verdicts learnt were given up (seed).
	cleared bool
}

const (
	// stateUnique marks a node whose content no other node is known to share.
	stateUnique = -1
	// stateEmpty is a freshly instantiated template node.
	stateEmpty = 0
)

type transKey struct{ state, class int }

type transition struct {
	fits    bool
	verdict framework.NodeResult // when !fits
	next    int                  // state after the placement, when fits
	slot    *slot                // the placement to copy, when fits
	// usedFrom and usedAfter: the devices used (hnode.used) by the last
	// node that took this placement, before (by its storage) and after.
	// Nodes copied alike share the list rather than each building one.
	usedFrom  sliceID[usedDevice]
	usedAfter []usedDevice
}

func newMemo(enabled bool) *memo {
	return &memo{enabled: enabled, trans: map[transKey]*transition{}}
}

// usable reports whether verdicts for cls may be memoized and reused.
func (m *memo) usable(cls *class) bool {
	return m.enabled && cls.memoizable
}

// lookup returns the memoized verdict for a pod of cls on a node in state,
// or nil.
func (m *memo) lookup(state int, cls *class) *transition {
	if state == stateUnique || !m.usable(cls) {
		return nil
	}
	t := m.trans[transKey{state, cls.id}]
	if t != nil {
		m.hits++
	}
	return t
}

// peek is lookup without counting a hit.
func (m *memo) peek(state int, cls *class) *transition {
	if state == stateUnique || !m.usable(cls) {
		return nil
	}
	return m.trans[transKey{state, cls.id}]
}

// fail memoizes a rejection.
func (m *memo) fail(state int, cls *class, verdict framework.NodeResult) {
	if state == stateUnique || !m.usable(cls) {
		return
	}
	m.trans[transKey{state, cls.id}] = &transition{verdict: verdict}
}

// fit memoizes a placement and returns the state it leads to.
func (m *memo) fit(state int, cls *class, s *slot) int {
	m.nextState++
	m.trans[transKey{state, cls.id}] = &transition{fits: true, next: m.nextState, slot: s}
	return m.nextState
}

// reset forgets every verdict. State ids stay valid (they describe node
// content, which does not change) and keep counting up.
func (m *memo) reset() {
	clear(m.trans)
	m.cleared = true
}

// A seed hands an estimate's memo to a later estimate of the same group
// and template (EstimateAndKeepFrom): the kept estimate then copies the
// placements the option's estimate found instead of asking the framework
// again about every node state. Its verdicts hold there when nothing a
// memoizable verdict reads changed in between: the snapshot is the one
// the option was estimated on, or one the planner carries the option's
// whole estimate to (carry.go: its pods are Independent and what was
// kept since is local, so the same verdicts hold). Within one estimate
// a verdict holds from where it was learnt on; the keep meets each state
// earlier or as early, so the memo is handed on only when nothing its
// estimate did could change a verdict on another node: not when it was
// reset (an anti-affinity pod was placed, and what it learnt after was
// learnt beside that pod), nor when a placement took a device of a slice
// bound to no node or to another node (tookShared: a verdict learnt once
// such a device was gone, "does not fit" or a placement on the node's own
// pools, may differ while it is still free).
type seed struct {
	m    *memo
	tmpl *cloudprovider.NodeTemplate
	// keys are the class keys by class id of the estimate's ordering:
	// the later estimate orders other pods and numbers its classes anew.
	keys []string
}

// seedOf is what r's memo can hand on, nil when nothing.
func (r *run) seedOf(classes []*class) *seed {
	if !r.memo.enabled || r.memo.cleared || r.res.tookShared || len(r.memo.trans) == 0 {
		return nil
	}
	keys := make([]string, len(classes))
	for i, c := range classes {
		keys[i] = c.key
	}
	return &seed{m: r.memo, tmpl: r.tmpl, keys: keys}
}

// sow fills m, still empty, with s's verdicts for the classes of
// classes that s knew by key. State ids keep counting from s's.
func (m *memo) sow(s *seed, classes []*class) {
	if s == nil || !m.enabled {
		return
	}
	ids := make(map[string]int, len(classes))
	for _, c := range classes {
		ids[c.key] = c.id
	}
	for k, t := range s.m.trans {
		if id, ok := ids[s.keys[k.class]]; ok {
			m.trans[transKey{k.state, id}] = t
		}
	}
	m.nextState = s.m.nextState
}
