package reservations

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReasonReservedCapacity is why scale-down keeps a node.
const ReasonReservedCapacity = "ReservedCapacity"

// Keep is true for a node on an active reservation (idle paid capacity:
// removing it saves nothing) unless --scale-down-reserved-nodes allows
// it. A node on a block about to end is not kept: it is being drained.
// With Rank, this is what scale-down asks of the reservations.
func (c *Count) Keep(node *corev1.Node, now time.Time) (reason string, keep bool) {
	b := c.book()
	if b == nil || c.policy.opts.ScaleDownReserved {
		return "", false
	}
	slot := b.NodeSlot(node.Name)
	if slot == nil || !slot.Active(now) || slot.Ending(now, c.policy.opts.EndMargin) {
		return "", false
	}
	return ReasonReservedCapacity, true
}

// Rank orders removals, lower first: nodes on no reservation (0) before
// nodes on one (1).
func (c *Count) Rank(node *corev1.Node, now time.Time) int {
	b := c.book()
	if b == nil {
		return 0
	}
	if slot := b.NodeSlot(node.Name); slot != nil && slot.Active(now) {
		return 1
	}
	return 0
}
