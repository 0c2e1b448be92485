package planner

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
)

// choose picks, among the unneeded nodes in the order they were
// simulated, those unneeded long enough, as many as the limits allow and
// never taking a group below its minimum. Removing only some of the
// simulated nodes is safe: every later simulation counted the earlier
// ones as gone, so leaving one in place only adds room. The nodes of a
// gang that moves whole are chosen together or not at all, and take one
// drain slot between them; gangs are checked again against the nodes
// really chosen.
func (p *RemovalPlanner) choose(plan *RemovalPlan, cands []*candidate, gangs *drainability.Gangs, in RemovalInput) {
	byName := make(map[string]*candidate, len(cands))
	for _, c := range cands {
		byName[c.node.Name] = c
	}
	left := map[string]int{} // nodes a group may still lose
	for _, g := range in.Groups {
		deleting := 0
		for _, n := range g.Nodes {
			if in.Deleting[n.Name] {
				deleting++
			}
		}
		left[g.Id] = g.Size - deleting - g.Min
	}
	budget := p.opts.MaxParallelism - len(in.Deleting)
	drains := p.opts.MaxDrainParallelism - in.InFlightDrains
	chosen := map[string]bool{}
	for _, name := range plan.Unneeded {
		if budget <= 0 {
			return
		}
		if chosen[name] {
			continue
		}
		unit, ok := p.unit(plan, byName, name, in)
		if !ok || len(unit) > budget {
			continue
		}
		need := map[string]int{}
		nonEmpty := false
		var evict []*corev1.Pod
		for _, c := range unit {
			need[c.group.Id]++
			nonEmpty = nonEmpty || len(c.moving) > 0
			evict = append(evict, c.evict...)
		}
		fits := !nonEmpty || drains > 0
		for g, k := range need {
			fits = fits && left[g] >= k
		}
		if !fits {
			continue
		}
		for _, c := range unit {
			chosen[c.node.Name] = true
		}
		if gangs.Check(evict, chosen) != "" {
			for _, c := range unit {
				delete(chosen, c.node.Name)
			}
			continue
		}
		for _, c := range unit {
			r := Removal{Node: c.node, Group: c.group.Id, Evict: c.evict, Moves: plan.movesOf[c.node.Name], Utilization: c.util}
			if len(c.moving) == 0 {
				plan.Empty = append(plan.Empty, r)
			} else {
				plan.Drain = append(plan.Drain, r)
			}
			left[c.group.Id]--
			budget--
		}
		if nonEmpty {
			drains--
		}
	}
}

// unit returns the candidates that must go with the named node (itself
// included), if every one of them has been unneeded long enough: an
// unready one for --scale-down-unready-time, as upstream.
func (p *RemovalPlanner) unit(plan *RemovalPlan, byName map[string]*candidate, name string, in RemovalInput) ([]*candidate, bool) {
	names, ok := p.closure(plan, byName, name)
	if !ok {
		return nil, false
	}
	out := make([]*candidate, 0, len(names))
	for _, n := range names {
		c := byName[n]
		if c == nil {
			return nil, false
		}
		wait := cmp.Or(c.group.UnneededTime, p.opts.UnneededTime)
		if !eligibility.IsReady(c.node) {
			wait = cmp.Or(c.group.UnreadyTime, p.opts.UnreadyTime)
		}
		if !p.tracker.Ready(n, in.Now, wait) {
			return nil, false
		}
		out = append(out, c)
	}
	return out, true
}

// closure is the nodes that must go with the named node: its gang's
// (unitOf), its unit's (RemovalGroup.Units) and, for a group that shrinks to zero at once
// (zeroOrMaxNodeScaling, RemovalGroup.Whole), every node of the group,
// and theirs in turn. ok is false when a whole group has nodes that are
// not registered yet (they would stay) or one that is not a candidate.
func (p *RemovalPlanner) closure(plan *RemovalPlan, byName map[string]*candidate, name string) ([]string, bool) {
	seen := map[string]bool{}
	var out []string
	queue := []string{name}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		if u := plan.unitOf[n]; len(u) > 0 {
			queue = append(queue, u...)
		}
		c := byName[n]
		if c == nil {
			return nil, false
		}
		queue = append(queue, c.group.unitMates(n)...)
		if g := c.group; g.Whole {
			if len(g.Nodes) != g.Size {
				return nil, false
			}
			for _, m := range g.Nodes {
				queue = append(queue, m.Name)
			}
		}
	}
	return out, true
}
