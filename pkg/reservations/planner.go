package reservations

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// ReasonReservation is why a reserved-only group cannot help a pod.
const ReasonReservation = "reservation"

// Room caps a group for the planner. A group whose nodes are "reserved"
// launches only onto its reservations: room is what they have left for
// the pods, and eligible the pods it may serve (a block ending soon serves
// only pods that declare they finish before its end). Other groups are not
// capped (room -1): their nodes beyond the reservations are on-demand.
func (c *Count) Room(g *nodegroups.Info, pods []*corev1.Pod) (room int, eligible []*corev1.Pod, reason, message string) {
	b := c.book()
	if b == nil || !b.ReservedOnly(g.Id) {
		return -1, pods, "", ""
	}
	if n := b.Available(g.Id, pods); n > 0 {
		return n, pods, "", ""
	}
	// Not every pod can use the same reservations: keep those that can
	// use some, and the room they share.
	for _, p := range pods {
		if b.Available(g.Id, []*corev1.Pod{p}) > 0 {
			eligible = append(eligible, p)
		}
	}
	if len(eligible) > 0 {
		if n := b.Available(g.Id, eligible); n > 0 {
			return n, eligible, "", ""
		}
		eligible = eligible[:1]
		return b.Available(g.Id, eligible), eligible, "", ""
	}
	return 0, nil, ReasonReservation, fmt.Sprintf("node group %s launches only onto reservations: %s", g.Id, b.WhyNot(g.Id, pods))
}

// Describe says what an option of nodes new nodes of g for pods lands on:
// the group's capacity type, how many nodes go onto reservations and what
// those cost per hour (0 when already paid).
func (c *Count) Describe(g *nodegroups.Info, nodes int, pods []*corev1.Pod) (capacityType string, reserved int, price float64) {
	b := c.book()
	if b == nil {
		return CapacityOnDemand, 0, 0
	}
	reserved, price = b.Peek(g.Id, nodes, pods)
	return b.CapacityType(g.Id), reserved, price
}

// Take books a chosen scale-up onto the group's reservations, so the
// planner's later choices in this loop (other groups sharing a
// reservation) see it taken.
func (c *Count) Take(g *nodegroups.Info, nodes int, pods []*corev1.Pod) {
	b := c.book()
	if b == nil {
		return
	}
	reserved, _ := b.Take(g.Id, nodes, pods)
	c.mu.Lock()
	c.taken[g.Id] += reserved
	c.mu.Unlock()
}

// Mark returns a function that undoes every Take made after it: the
// planner tries plans (a gang in each topology domain) and keeps one.
func (c *Count) Mark() (restore func()) {
	b := c.book()
	if b == nil {
		return func() {}
	}
	inUse := make([]int, len(b.slots))
	for i, sl := range b.slots {
		inUse[i] = sl.InUse
	}
	c.mu.Lock()
	taken := make(map[string]int, len(c.taken))
	for k, v := range c.taken {
		taken[k] = v
	}
	c.mu.Unlock()
	return func() {
		for i, sl := range b.slots {
			sl.InUse = inUse[i]
		}
		c.mu.Lock()
		c.taken = taken
		c.mu.Unlock()
	}
}

// book is the count's Book; nil for a nil Count.
func (c *Count) book() *Book {
	if c == nil {
		return nil
	}
	return c.Book
}
