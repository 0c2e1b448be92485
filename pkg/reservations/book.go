package reservations

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GroupNodes is what the book needs to know of a node group.
type GroupNodes struct {
	ID string
	// Template is a node of the group (labels: capacity type, instance
	// type); nil when unknown.
	Template *corev1.Node
	// Nodes are the group's registered nodes.
	Nodes []*corev1.Node
	// Size counts registered nodes, booting ones and requests in flight.
	Size int
	// Reservation is the CapacityReservation object the group names
	// itself (cloudprovider.ReservationNamer), "" for none: the object
	// serves it, and it launches only onto it unless its template says
	// another capacity type.
	Reservation string
}

// Slot is a reservation with its counter for this loop.
type Slot struct {
	*Reservation
	// InUse counts the nodes on it: registered, booting and requested.
	InUse int
	// Nodes are the registered nodes on it.
	Nodes []*corev1.Node
}

// Book is one loop's count of every reservation. Assignment is
// deterministic: reservations in order (provider first, then objects by
// name), each filled from the groups it serves, registered nodes oldest
// first (a node labelled with a reservation goes to it first), then nodes
// still coming. One counter per reservation: groups sharing one take from
// the same count, and nothing is assigned beyond it.
type Book struct {
	now    time.Time
	margin time.Duration
	slots  []*Slot
	groups map[string]*GroupNodes
	nodeOn map[string]*Slot
}

// NewBook counts reservations against the groups at now.
func NewBook(now time.Time, margin time.Duration, res []*Reservation, groups []GroupNodes) *Book {
	b := &Book{now: now, margin: margin, groups: map[string]*GroupNodes{}, nodeOn: map[string]*Slot{}}
	for _, r := range res {
		b.slots = append(b.slots, &Slot{Reservation: withNamingGroups(r, groups)})
	}
	unplacedNodes := map[string][]*corev1.Node{}
	coming := map[string]int{}
	var order []string
	for i := range groups {
		g := &groups[i]
		b.groups[g.ID] = g
		order = append(order, g.ID)
		nodes := append([]*corev1.Node(nil), g.Nodes...)
		sort.SliceStable(nodes, func(i, j int) bool {
			ti, tj := nodes[i].CreationTimestamp.Time, nodes[j].CreationTimestamp.Time
			return ti.Before(tj) || ti.Equal(tj) && nodes[i].Name < nodes[j].Name
		})
		unplacedNodes[g.ID] = nodes
		coming[g.ID] = max(g.Size-len(nodes), 0)
	}
	// Pinned nodes first, then active reservations, then capacity blocks
	// that have ended (they take only registered nodes, which are
	// drained). Other reservations that ended hold nothing any more.
	byID := map[string]*Slot{}
	for _, s := range b.slots {
		byID[s.ID] = s
	}
	for _, id := range order {
		var rest []*corev1.Node
		for _, n := range unplacedNodes[id] {
			s := byID[n.Labels[LabelReservation]]
			if s != nil && s.Started(now) && (s.Active(now) || s.IsBlock()) && s.InUse < s.Count && s.Serves(id, b.groups[id].Template) {
				b.assign(s, n)
				continue
			}
			rest = append(rest, n)
		}
		unplacedNodes[id] = rest
	}
	for _, pass := range []bool{true, false} {
		for _, s := range b.slots {
			if s.Active(now) != pass || !s.Started(now) || !pass && !s.IsBlock() {
				continue
			}
			for _, id := range b.ServedGroups(s) {
				for len(unplacedNodes[id]) > 0 && s.InUse < s.Count {
					b.assign(s, unplacedNodes[id][0])
					unplacedNodes[id] = unplacedNodes[id][1:]
				}
				if pass {
					take := min(coming[id], s.Count-s.InUse)
					s.InUse += take
					coming[id] -= take
				}
			}
		}
	}
	for _, s := range b.slots {
		if s.Active(now) && s.ReportedInUse > s.InUse {
			// The provider sees instances the autoscaler does not
			// (other groups, other tools): they take the count too.
			s.InUse = min(s.ReportedInUse, s.Count)
		}
	}
	return b
}

// withNamingGroups is r serving also the groups that name it (a copy, when
// any does): a CapacityReservation object is named by groups as well as
// naming them.
func withNamingGroups(r *Reservation, groups []GroupNodes) *Reservation {
	if r.Origin != SourceCRD {
		return r
	}
	out := r
	for _, g := range groups {
		if g.Reservation == "" || g.Reservation != r.Name || slices.Contains(out.NodeGroups, g.ID) {
			continue
		}
		if out == r {
			c := *r
			c.NodeGroups = slices.Clone(r.NodeGroups)
			out = &c
		}
		out.NodeGroups = append(out.NodeGroups, g.ID)
	}
	return out
}

func (b *Book) assign(s *Slot, n *corev1.Node) {
	s.InUse++
	s.Nodes = append(s.Nodes, n)
	b.nodeOn[n.Name] = s
}

// ServedGroups are the known groups a reservation serves, its named ones
// in its order, then those matching its instance type.
func (b *Book) ServedGroups(s *Slot) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range s.NodeGroups {
		if g := b.groups[id]; g != nil && !seen[id] {
			out, seen[id] = append(out, id), true
		}
	}
	var matched []string
	for id, g := range b.groups {
		if !seen[id] && s.Serves(id, g.Template) {
			matched = append(matched, id)
		}
	}
	sort.Strings(matched)
	return append(out, matched...)
}

// Slots are the reservations with their counts.
func (b *Book) Slots() []*Slot { return b.slots }

// Left is how many more nodes may launch on the reservation now.
func (b *Book) Left(s *Slot) int {
	if !s.Active(b.now) {
		return 0
	}
	return max(s.Count-s.InUse, 0)
}

// NodeSlot is the reservation a registered node is on, or nil.
func (b *Book) NodeSlot(node string) *Slot { return b.nodeOn[node] }

// CapacityType is how the group's nodes are bought: as its template says,
// else reserved for a group that names its reservation, else on-demand.
func (b *Book) CapacityType(group string) string {
	g := b.groups[group]
	if g == nil {
		return CapacityOnDemand
	}
	if g.Template != nil {
		if v := g.Template.Labels[LabelCapacityType]; v != "" {
			return v
		}
	}
	if g.Reservation != "" {
		return CapacityReserved
	}
	return CapacityOnDemand
}

// ReservedOnly tells whether the group launches only onto reservations.
func (b *Book) ReservedOnly(group string) bool { return b.CapacityType(group) == CapacityReserved }

// usable are the reservations with room that new nodes of group may use
// for every one of pods.
func (b *Book) usable(group string, pods []*corev1.Pod) []*Slot {
	g := b.groups[group]
	if g == nil {
		return nil
	}
	var out []*Slot
	for _, s := range b.slots {
		if b.Left(s) == 0 || !s.Serves(group, g.Template) {
			continue
		}
		ok := true
		for _, p := range pods {
			if !s.servesPod(p, b.now, b.margin) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// Available is how many new nodes of group may land on reservations for
// all of pods.
func (b *Book) Available(group string, pods []*corev1.Pod) int {
	n := 0
	for _, s := range b.usable(group, pods) {
		n += b.Left(s)
	}
	return n
}

// Take books n new nodes of group for pods on its reservations, in
// order; it returns how many landed on reservations and their price.
func (b *Book) Take(group string, n int, pods []*corev1.Pod) (reserved int, price float64) {
	for _, s := range b.usable(group, pods) {
		take := min(n-reserved, b.Left(s))
		s.InUse += take
		reserved += take
		price += float64(take) * s.Price
		if reserved == n {
			break
		}
	}
	return reserved, price
}

// Peek is Take without booking.
func (b *Book) Peek(group string, n int, pods []*corev1.Pod) (reserved int, price float64) {
	for _, s := range b.usable(group, pods) {
		take := min(n-reserved, b.Left(s))
		reserved += take
		price += float64(take) * s.Price
		if reserved == n {
			break
		}
	}
	return reserved, price
}

// WhyNot says why a reserved-only group cannot launch for pods.
func (b *Book) WhyNot(group string, pods []*corev1.Pod) string {
	g := b.groups[group]
	var parts []string
	for _, s := range b.slots {
		if g == nil || !s.Serves(group, g.Template) {
			continue
		}
		switch {
		case !s.Started(b.now):
			parts = append(parts, fmt.Sprintf("%s starts at %s", s.ID, s.Start.UTC().Format(time.RFC3339)))
		case s.Ended(b.now):
			parts = append(parts, fmt.Sprintf("%s ended at %s", s.ID, s.End.UTC().Format(time.RFC3339)))
		case b.Left(s) == 0:
			parts = append(parts, fmt.Sprintf("%s is full (%d of %d in use)", s.ID, s.InUse, s.Count))
		case s.Ending(b.now, b.margin):
			parts = append(parts, fmt.Sprintf("%s ends at %s, before the pods' declared run time (%s) ends", s.ID, s.End.UTC().Format(time.RFC3339), AnnotationExpectedRuntime))
		}
	}
	if len(parts) == 0 && g != nil && g.Reservation != "" {
		return fmt.Sprintf("it names CapacityReservation %s, which does not exist or is not valid", g.Reservation)
	}
	if len(parts) == 0 {
		return "no reservation serves the group"
	}
	return strings.Join(parts, "; ")
}

// Now is the time the book was counted at; Margin its end margin.
func (b *Book) Now() time.Time { return b.now }

// Margin: a block ending within it is drained.
func (b *Book) Margin() time.Duration { return b.margin }

// HasGroup: the book counted group id (one of this autoscaler's groups).
func (b *Book) HasGroup(id string) bool { return b.groups[id] != nil }

// Nodes are the counted groups' nodes (registered and booting).
func (b *Book) Nodes() []*corev1.Node {
	var out []*corev1.Node
	for _, g := range b.groups {
		out = append(out, g.Nodes...)
	}
	return out
}
