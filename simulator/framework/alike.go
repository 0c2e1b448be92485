package framework

import (
	"fmt"
	"strings"

	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// Alike lets a pod group cycle try one placement of each kind and copy its
// outcome to the placements alike to it (the alikePlacements shortcut):
// a gang over template instances meets the same racks and blocks again
// and again, each a fresh copy of the same templates, and the cycle's
// cost would otherwise grow with the domains rather than with what
// differs between them. docs/design/caches.md has the rule.
type Alike struct {
	// Key is the kind of a placement of group t over nodes (in the
	// placement's order): placements with equal non-empty keys must give
	// the group's members the same outcome, node i of one standing for
	// node i of the other. "" is alike to nothing.
	Key func(t *GroupTree, nodes []string) string
	// Verify tries every placement anyway and reports, through Found, a
	// copy that differs from its own trial; the trial's outcome is used.
	Verify bool
	// Found is told of a copy that differs (Verify); Checked of every
	// copy compared. Either may be nil.
	Found   func(group, placement, got, want string)
	Checked func()

	// copies counts the outcomes copied unchecked in one cycle.
	copies int
}

// copyOf is the outcome of placement rep (its nodes repNodes) carried to
// a placement alike to it, named name over nodes: every member on the
// node at the same position, every verdict likewise.
func (r *Runner) copyOf(rep *PlacementOutcome, name string, nodes []string) PlacementOutcome {
	to := make(map[string]string, len(nodes))
	for i, n := range rep.Nodes {
		to[n] = nodes[i]
	}
	out := *rep
	out.Name, out.Nodes = name, nodes
	out.Members = r.copyMembers(rep.Members, to)
	if rep.Children != nil {
		out.Children = make([]*PodGroupResult, len(rep.Children))
		for i, c := range rep.Children {
			if c != nil {
				out.Children[i] = r.copyResult(c, to)
			}
		}
	}
	return out
}

func (r *Runner) copyResult(res *PodGroupResult, to map[string]string) *PodGroupResult {
	out := *res
	out.Placements = make([]PlacementOutcome, len(res.Placements))
	for i := range res.Placements {
		p := &res.Placements[i]
		nodes := make([]string, len(p.Nodes))
		for j, n := range p.Nodes {
			nodes[j] = to[n]
		}
		out.Placements[i] = r.copyOf(p, r.valueAt(p, nodes), nodes)
	}
	return &out
}

// valueAt names a child placement carried to nodes: the value, on the
// first of nodes, of the label whose value named it on its first node.
func (r *Runner) valueAt(p *PlacementOutcome, nodes []string) string {
	if p.Name == "" || len(p.Nodes) == 0 {
		return p.Name
	}
	from, err1 := r.snap.Get(p.Nodes[0])
	to, err2 := r.snap.Get(nodes[0])
	if err1 != nil || err2 != nil || from.Node() == nil || to.Node() == nil {
		return p.Name
	}
	for k, v := range from.Node().Labels {
		if v == p.Name {
			if w, ok := to.Node().Labels[k]; ok {
				return w
			}
		}
	}
	return p.Name
}

func (r *Runner) copyMembers(members []*ScheduleResult, to map[string]string) []*ScheduleResult {
	if members == nil {
		return nil
	}
	out := make([]*ScheduleResult, len(members))
	for i, m := range members {
		if m == nil {
			continue
		}
		c := &ScheduleResult{Node: to[m.Node], Results: make([]NodeResult, len(m.Results))}
		for j, v := range m.Results {
			v.Node = to[v.Node]
			c.Results[j] = v
		}
		if m.Pod != nil {
			pod := *m.Pod // the snapshot's: not modified, copied
			pod.Spec.NodeName = c.Node
			c.Pod = &pod
		}
		out[i] = c
	}
	return out
}

// tryAlike is tryPlacement for a placement whose key matched rep's: the
// copy, checked against a trial of its own with Verify.
func (r *Runner) tryAlike(alike *Alike, t *GroupTree, rep *PlacementOutcome, repState *schedframework.CycleState, name string, nodes []string,
	try func() (PlacementOutcome, *schedframework.CycleState, error)) (PlacementOutcome, *schedframework.CycleState, error) {
	out := r.copyOf(rep, name, nodes)
	if !alike.Verify {
		alike.copies++
		return out, repState, nil
	}
	real, state, err := try()
	if err != nil {
		return real, state, err
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	if got, want := outcomeString(&out), outcomeString(&real); got != want && alike.Found != nil {
		alike.Found(t.String(), name, got, want)
	}
	return real, state, nil
}

// outcomeString is what a copy must match: the verdict and every
// member's node.
func outcomeString(o *PlacementOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", o.Code, o.Plugin)
	for _, m := range o.Members {
		switch {
		case m == nil:
			b.WriteString(" -")
		case m.Node == "":
			b.WriteString(" none")
		default:
			b.WriteString(" " + m.Node)
		}
	}
	return b.String()
}
