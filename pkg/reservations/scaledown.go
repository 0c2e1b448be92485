package reservations

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReasonReservedCapacity is why scale-down keeps a node.
const ReasonReservedCapacity = "ReservedCapacity"

// ScaleDownView is what scale-down asks of reservations: whether to keep an
// unneeded node because it is paid for anyway, and in which order to
// remove nodes. It reads the stage's latest count.
type ScaleDownView struct {
	stage *Policy
}

// ScaleDownView returns the scale-down view of the stage.
func (s *Policy) ScaleDownView() *ScaleDownView { return &ScaleDownView{stage: s} }

// Keep is true for a node on an active reservation (idle paid capacity:
// removing it saves nothing) unless --scale-down-reserved-nodes allows
// it. A node on a block about to end is not kept: it is being drained.
func (d *ScaleDownView) Keep(node *corev1.Node, now time.Time) (reason string, keep bool) {
	if d == nil || d.stage == nil || d.stage.opts.ScaleDownReserved {
		return "", false
	}
	b := d.stage.Book()
	if b == nil {
		return "", false
	}
	slot := b.NodeSlot(node.Name)
	if slot == nil || !slot.Active(now) || slot.Ending(now, d.stage.opts.EndMargin) {
		return "", false
	}
	return ReasonReservedCapacity, true
}

// Rank orders removals, lower first: nodes on no reservation (0) before
// nodes on one (1).
func (d *ScaleDownView) Rank(node *corev1.Node, now time.Time) int {
	if d == nil || d.stage == nil {
		return 0
	}
	b := d.stage.Book()
	if b == nil {
		return 0
	}
	if slot := b.NodeSlot(node.Name); slot != nil && slot.Active(now) {
		return 1
	}
	return 0
}
