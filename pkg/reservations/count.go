package reservations

import (
	"sync"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
)

// Count is one pass's count of the reservations and the one face every
// reader of the pass sees: the planner caps and books on it (Room, Take),
// scale-down keeps and orders by it (Keep, Rank), the status shows its
// Book and the upkeep acts on it. Its methods are safe on a nil Count (no
// reservations at all).
type Count struct {
	Book     *Book
	policy   *Policy
	objects  []Object
	rejected []Rejected
	// complete: every reservation is known, so a block missing from the
	// list was deleted (not merely unseen).
	complete bool

	mu sync.Mutex
	// taken counts, per group, the nodes of this pass's plan booked onto
	// reservations, for the launched-nodes metric.
	taken map[string]int
}

// Object is a valid CapacityReservation with its model.
type Object struct {
	CR          *v1alpha1.CapacityReservation
	Reservation *Reservation
}

// Objects are the valid CapacityReservation objects counted.
func (c *Count) Objects() []Object {
	if c == nil {
		return nil
	}
	return c.objects
}

// Rejected are the objects the count ignored, and why.
func (c *Count) Rejected() []Rejected {
	if c == nil {
		return nil
	}
	return c.rejected
}

// Complete: every source answered, so a reservation missing from the count
// no longer exists.
func (c *Count) Complete() bool { return c != nil && c.complete }

// Launched records what a scale-up really added to group (whose size was
// before when the pass began): later passes count it before the provider
// shows it, and the launched-nodes metric says what it landed on.
func (c *Count) Launched(group string, before, added int, now time.Time) {
	if c == nil || added <= 0 {
		return
	}
	s := c.policy
	s.ledger.launched(group, before, added, now)
	c.mu.Lock()
	reserved := min(added, c.taken[group])
	c.taken[group] -= reserved
	c.mu.Unlock()
	if s.metrics == nil {
		return
	}
	s.metrics.LaunchedNodes.WithLabelValues(CapacityReserved).Add(float64(reserved))
	if rest := added - reserved; rest > 0 {
		ct := CapacityOnDemand
		if c.Book.CapacityType(group) == CapacitySpot {
			ct = CapacitySpot
		}
		s.metrics.LaunchedNodes.WithLabelValues(ct).Add(float64(rest))
	}
}
