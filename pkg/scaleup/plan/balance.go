package plan

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
)

// spread is the chosen option as scale-ups: one of g, or, with
// balancing, one per group similar to g that could take the same pods
// (options are this round's), the nodes split smallest group first and
// the pods in proportion. Options on capacity reservations are never
// spread: their nodes are booked where the reservation is.
//
// The simulation keeps all the nodes as g's: similar groups' nodes differ
// only in labels no pod of the option depends on.
//
// nodes, when known, are the option's pods by new node: each group then
// takes its nodes' pods, so that every scale-up says which pods go on
// which of its nodes.
//
// planned are the nodes the pass planned for each group already.
func (p *Planner) spread(g *nodegroups.Info, best *expander.Option, options []expander.Option, groups []*nodegroups.Info, nodes [][]*corev1.Pod,
	planned map[string]int) []act.ScaleUp {
	one := []act.ScaleUp{{Group: g, Delta: best.NodeCount, Pods: best.Pods, Nodes: nodes}}
	if n, _ := g.Template.UnitSize(); p.opts.Balance == nil || best.ReservedNodes > 0 || n > 1 {
		// Units are not split: each share would be padded to a unit.
		return one
	}
	members := []*nodegroups.Info{g}
	for _, o := range options {
		if o.NodeGroup == g.Id || o.ReservedNodes > 0 {
			continue
		}
		h := groupByID(groups, o.NodeGroup)
		if h == nil || !takesSame(o, h.Max-h.Size()-planned[h.Id], best.Pods) || !p.opts.Balance.Similar(g.Template, h.Template) {
			continue
		}
		members = append(members, h)
	}
	if len(members) == 1 {
		return one
	}
	bg := make([]balance.Group, len(members))
	for i, m := range members {
		bg[i] = balance.Group{ID: m.Id, Size: m.Size() + planned[m.Id], Max: m.Max}
	}
	split := balance.Split(bg, best.NodeCount)
	var ups []act.ScaleUp
	given, placed := 0, 0
	for i, n := range split {
		if n == 0 {
			continue
		}
		given += n
		if nodes != nil {
			mine := nodes[given-n : given]
			ups = append(ups, act.ScaleUp{Group: members[i], Delta: n, Pods: flatten(mine), Nodes: mine})
			continue
		}
		// The pods go in proportion, the last group taking the rest.
		upto := len(best.Pods) * given / best.NodeCount
		ups = append(ups, act.ScaleUp{Group: members[i], Delta: n, Pods: best.Pods[placed:upto]})
		placed = upto
	}
	if len(ups) == 0 {
		return one
	}
	return ups
}

// takesSame tells whether option o (of group h) could take every pod of
// pods: it placed them all, or it ran out of room. A pod it left with room
// to spare (room is what h could take) needs something h lacks (a selector on its zone, say): then h
// is no balancing partner, as upstream balances only groups that can run
// the same pending pods.
func takesSame(o expander.Option, room int, pods []*corev1.Pod) bool {
	placed := make(map[types.UID]bool, len(o.Pods))
	for _, p := range o.Pods {
		placed[p.UID] = true
	}
	for _, p := range pods {
		if !placed[p.UID] {
			return o.NodeCount >= room
		}
	}
	return true
}

func flatten(nodes [][]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pods := range nodes {
		out = append(out, pods...)
	}
	return out
}
