package estimator

import "github.com/dra-autoscaler/dra-autoscaler/simulator/framework"

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
}
