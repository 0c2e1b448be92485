package planner

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodePolicy lets other rules (capacity reservations, cost) take part in
// scale-down without the planner knowing them.
//
// Keep returning keep=true makes the node unremovable this pass, reported
// with the reason given. Rank orders removable nodes: lower ranks are
// removed first. With several policies, ranks compare in the order the
// policies were given (the first policy's rank first, the next breaks
// ties); nodes of equal rank go by lower utilization, then by the lower
// disruption cost of their pods (cost.go), then by name.
type NodePolicy interface {
	Keep(node *corev1.Node, now time.Time) (reason string, keep bool)
	Rank(node *corev1.Node, now time.Time) int
}

// ranks are a node's ranks under each policy.
type ranks []int

func rankOf(policies []NodePolicy, node *corev1.Node, now time.Time) ranks {
	if len(policies) == 0 {
		return nil
	}
	r := make(ranks, len(policies))
	for i, p := range policies {
		r[i] = p.Rank(node, now)
	}
	return r
}

// compare is -1, 0 or 1 as a ranks before, with or after b.
func (a ranks) compare(b ranks) int {
	for i := range min(len(a), len(b)) {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return 0
}

// keep asks every policy; the first that keeps the node gives the reason.
func keep(policies []NodePolicy, node *corev1.Node, now time.Time) (string, bool) {
	for _, p := range policies {
		if reason, k := p.Keep(node, now); k {
			if reason == "" {
				reason = "KeptByPolicy"
			}
			return reason, true
		}
	}
	return "", false
}
