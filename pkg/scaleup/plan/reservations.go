package plan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
)

// Capacity is the reservations model as the planner needs it
// (pkg/reservations implements it).
type Capacity interface {
	// Room caps group g for pods: at most room new nodes (-1: no cap),
	// serving only eligible; reason and message say why when room is 0.
	Room(g *nodegroups.Info, pods []*corev1.Pod) (room int, eligible []*corev1.Pod, reason, message string)
	// Describe says what nodes new nodes of g for pods land on: the
	// group's capacity type, how many go onto reservations, their price.
	Describe(g *nodegroups.Info, nodes int, pods []*corev1.Pod) (capacityType string, reserved int, price float64)
	// Take books a chosen scale-up, so later choices see it taken.
	Take(g *nodegroups.Info, nodes int, pods []*corev1.Pod)
	// Mark returns a function that undoes every Take since (for plans
	// tried and dropped).
	Mark() (restore func())
}

// WithCapacity is the planner for one pass, reservation-aware with that
// pass's count; the planner itself is left as it is.
func (p *Planner) WithCapacity(c Capacity) *Planner {
	cp := *p
	cp.capacity = c
	return &cp
}

// reserve caps a candidate by its reservations; false when the group
// cannot help any of the pods (the reason is recorded for each).
func (p *Planner) reserve(c *candidate, pods []*corev1.Pod, reasons *reasonLog) bool {
	if p.capacity == nil {
		return true
	}
	room, eligible, reason, msg := p.capacity.Room(c.info, pods)
	if room < 0 {
		return true
	}
	if len(eligible) < len(pods) {
		keep := make(map[types.UID]bool, len(eligible))
		for _, pod := range eligible {
			keep[pod.UID] = true
		}
		why := msg
		if why == "" {
			why = "its reservations cannot serve the pod (capacity block ending before the pod's declared run time, or none left)"
		}
		reasons.except(pods, keep, GroupReason{Group: c.info.Id, Reason: orDefault(reason, "reservation"), Message: why})
		c.pods = eligible
	}
	if whole := wholeUnits(c.info, room); whole < room {
		if whole == 0 && len(eligible) > 0 {
			n, _ := c.info.Template.UnitSize()
			reasons.except(eligible, nil, GroupReason{Group: c.info.Id, Reason: ReasonUnitSize,
				Message: fmt.Sprintf("its reservations have room for %d node(s), less than a unit of %d", room, n)})
		}
		room = whole
	}
	if room <= 0 || len(eligible) == 0 {
		return false
	}
	if room < c.room {
		c.room, c.reason = room, "reservation"
	}
	return true
}

// wholeUnits is room rounded down to whole units of g (a group whose
// nodes come in units launches onto its reservations a unit at a time:
// part of one would be on-demand, which a reserved-only group cannot
// be). room itself for other groups, or no cap (< 0).
func wholeUnits(g *nodegroups.Info, room int) int {
	if n, _ := g.Template.UnitSize(); n > 1 && room > 0 {
		return room / n * n
	}
	return room
}

// estimateCandidates estimates every candidate: those serving all pods in
// one pass (shared per-pod work), those restricted to some pods each alone;
// those whose last estimate carry holds take it instead.
func (p *Planner) estimateCandidates(ctx context.Context, pods []*corev1.Pod, cands []candidate, est []estimator.TemplateGroup,
	carry *carry) ([]*estimator.Estimate, error) {
	var shared []estimator.TemplateGroup
	var at []int
	results := make([]*estimator.Estimate, len(cands))
	for i, c := range cands {
		if res := carry.get(p.estimate, est[i], pods, c.pods); res != nil {
			own := c.pods
			if own == nil {
				own = pods
			}
			if err := p.estimate.CheckCarried(ctx, own, est[i], res); err != nil {
				return nil, fmt.Errorf("node group %s: %w", c.info.Id, err)
			}
			results[i] = res
			continue
		}
		carry.count(1)
		if c.pods == nil {
			shared, at = append(shared, est[i]), append(at, i)
			continue
		}
		res, err := p.estimate.EstimateGroups(ctx, c.pods, []estimator.TemplateGroup{est[i]})
		if err != nil {
			return nil, fmt.Errorf("node group %s: %w", c.info.Id, err)
		}
		results[i] = res[0]
	}
	if len(shared) > 0 {
		res, err := p.estimate.EstimateGroups(ctx, pods, shared)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			results[i] = res[j]
		}
	}
	return results, nil
}

// describe says on what capacity an option lands and prices its reserved
// nodes at the reservation's price, so that price comparisons see them.
func (p *Planner) describe(opt *expander.Option, g *nodegroups.Info) {
	if p.capacity == nil {
		return
	}
	ct, reserved, price := p.capacity.Describe(g, opt.NodeCount, opt.Pods)
	opt.CapacityType, opt.ReservedNodes = ct, reserved
	switch {
	case reserved <= 0:
	case reserved >= opt.NodeCount:
		opt.Price = price
	case opt.Price >= 0:
		opt.Price = price + opt.Price*float64(opt.NodeCount-reserved)/float64(opt.NodeCount)
	}
}

// take books a chosen scale-up onto the reservations.
func (p *Planner) take(g *nodegroups.Info, nodes int, pods []*corev1.Pod) {
	if p.capacity != nil {
		p.capacity.Take(g, nodes, pods)
	}
}

// markCapacity returns what undoes the bookings made after it.
func (p *Planner) markCapacity() func() {
	if p.capacity == nil {
		return func() {}
	}
	return p.capacity.Mark()
}

// reservedRoom caps want new nodes of g for pods by what its reservations
// have left now (for a group that launches only onto them).
func (p *Planner) reservedRoom(g *nodegroups.Info, pods []*corev1.Pod, want int) int {
	if p.capacity == nil || g == nil {
		return want
	}
	room, _, _, _ := p.capacity.Room(g, pods)
	if room < 0 {
		return want
	}
	return min(wholeUnits(g, room), want)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
