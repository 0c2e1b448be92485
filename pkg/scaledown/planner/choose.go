package planner

import (
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// choose picks, among the unneeded nodes in the order they were
// simulated, those unneeded long enough, as many as the limits allow and
// never taking a group below its minimum. Removing only some of the
// simulated nodes is safe: every later simulation counted the earlier
// ones as gone, so leaving one in place only adds room. Gangs are checked
// again against the nodes really chosen, because a gang may move whole
// only when every node it runs on goes.
func (p *Planner) choose(plan *Plan, cands []*candidate, gangs *drainability.Gangs, in Input) {
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
		c := byName[name]
		if c == nil || !p.tracker.Ready(name, in.Now, p.opts.UnneededTime) || left[c.group.Id] <= 0 {
			continue
		}
		empty := len(c.moving) == 0
		if !empty && drains <= 0 {
			continue
		}
		chosen[name] = true
		if gangs.Check(c.evict, chosen) != "" {
			delete(chosen, name)
			continue
		}
		r := Removal{Node: c.node, Group: c.group.Id, Evict: c.evict, Moves: plan.movesOf[name], Utilization: c.util}
		if empty {
			plan.Empty = append(plan.Empty, r)
		} else {
			plan.Drain = append(plan.Drain, r)
			drains--
		}
		left[c.group.Id]--
		budget--
	}
}
