package planner

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/removal"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// maxUnit bounds the nodes of a gang moved whole in one removal.
const maxUnit = 16

// simulate tries the candidates' removals in order, in one removal pass,
// and returns the nodes that could go. A candidate that hosts members of
// a gang spread over several nodes is tried together with those nodes,
// when they all are candidates: the gang moves whole or stays.
func (p *RemovalPlanner) simulate(ctx context.Context, plan *RemovalPlan, cands []*candidate, pdbs *drainability.PDBs, gangs *drainability.Gangs, in RemovalInput) (_ []string, err error) {
	byName := make(map[string]*candidate, len(cands))
	for _, c := range cands {
		byName[c.node.Name] = c
	}
	// Pods go to nodes that stay first (those no candidate, then the
	// candidates found to stay, as they are); among the other
	// candidates, to those tried last, which are the least likely to be
	// removed.
	stay := make([]string, 0, len(in.Destinations))
	for _, d := range in.Destinations {
		if byName[d] == nil {
			stay = append(stay, d)
		}
	}
	maybe := make([]string, 0, len(cands))
	for i := len(cands) - 1; i >= 0; i-- {
		maybe = append(maybe, cands[i].node.Name)
	}
	pass := removal.Begin(p.runner, stay, maybe)
	defer func() {
		if eerr := pass.End(); eerr != nil && err == nil {
			err = fmt.Errorf("scale-down simulation: %w", eerr)
		}
	}()
	if memo := p.memo(); memo != nil {
		pass.UseMemo(memo)
		copies, err := p.copies(cands)
		if err != nil {
			return nil, fmt.Errorf("scale-down simulation: %w", err)
		}
		pass.UseCopies(copies)
	}
	var out []string
	simulated := 0
	// removing holds the nodes removed so far; settled the nodes decided.
	removing := map[string]bool{}
	settled := map[string]bool{}
	for _, c := range cands {
		if settled[c.node.Name] {
			continue
		}
		unit := []*candidate{c}
		mates, whole := unitOfScale(c, byName, settled)
		if mates != nil {
			unit = mates
		}
		reason := gangCheck(unit, gangs, removing)
		// alone: why the node cannot go without the rest of its groups.
		alone := reason
		if reason != "" && mates == nil {
			if u := unitFor(c, byName, gangs, removing, settled); u != nil && gangCheck(u, gangs, removing) == "" {
				unit, reason = u, ""
			}
		}
		fail := func(reason, detail string) {
			for _, u := range unit {
				plan.Unremovable[u.node.Name] = Unremovable{Reason: reason, Detail: detail}
				settled[u.node.Name] = true
				pass.Stays(u.node.Name)
			}
		}
		if whole != "" {
			fail(UnitNotWhole, whole)
			continue
		}
		if reason != "" {
			fail(drainability.RunningGangMember, reason)
			continue
		}
		var pods []*corev1.Pod
		var rcs []removal.Candidate
		nonEmpty := 0
		for _, u := range unit {
			pods = append(pods, u.evict...)
			rcs = append(rcs, removal.Candidate{Node: u.node.Name, Pods: u.moving})
			if len(u.moving) > 0 {
				nonEmpty++
			}
		}
		if ok, _, detail := pdbs.Take(pods); !ok {
			fail(drainability.NotEnoughPdb, detail)
			continue
		}
		if nonEmpty > 0 && simulated+nonEmpty > p.opts.MaxNonEmptyCandidates {
			pdbs.Give(pods)
			fail(NotEvaluated, "over the per-pass limit of simulated nodes")
			continue
		}
		simulated += nonEmpty
		res, err := pass.TryAll(ctx, rcs)
		if err != nil {
			return nil, fmt.Errorf("scale-down simulation: %w", err)
		}
		if !res.Removable {
			pdbs.Give(pods)
			if alone != "" {
				// The group keeps the node: it cannot go alone, and the
				// whole group has nowhere to go together.
				fail(drainability.RunningGangMember, fmt.Sprintf("%s; moving the whole group together: %s", alone, res.Reason))
				continue
			}
			fail(NoPlaceToMovePods, res.Reason)
			continue
		}
		var names []string
		for _, u := range unit {
			names = append(names, u.node.Name)
		}
		for _, u := range unit {
			n := u.node.Name
			out = append(out, n)
			removing[n], settled[n] = true, true
			moves := map[string]string{}
			for _, pod := range u.moving {
				k := pod.Namespace + "/" + pod.Name
				moves[k] = res.Moves[k]
			}
			plan.record(n, moves, names)
		}
	}
	return out, nil
}

// gangCheck asks whether the unit's evictions keep every gang whole or
// above minCount, counting the nodes removed so far as gone.
func gangCheck(unit []*candidate, gangs *drainability.Gangs, removing map[string]bool) string {
	var evict []*corev1.Pod
	for _, u := range unit {
		removing[u.node.Name] = true
		evict = append(evict, u.evict...)
	}
	reason := gangs.Check(evict, removing)
	for _, u := range unit {
		delete(removing, u.node.Name)
	}
	return reason
}

// unitFor grows c into the set of candidates holding every running member
// of every gang on them (transitively), up to maxUnit nodes. It returns
// nil when c hosts no spread gang or a member runs on a node that is not
// a candidate still open in this pass; nodes already removed count as gone.
func unitFor(c *candidate, byName map[string]*candidate, gangs *drainability.Gangs, removing, settled map[string]bool) []*candidate {
	unit := []*candidate{c}
	in := map[string]bool{c.node.Name: true}
	for i := 0; i < len(unit); i++ {
		for _, n := range gangs.MemberNodes(unit[i].evict) {
			if in[n] || removing[n] {
				continue
			}
			other := byName[n]
			if other == nil || settled[n] || len(unit) >= maxUnit {
				return nil
			}
			in[n] = true
			unit = append(unit, other)
		}
	}
	if len(unit) == 1 {
		return nil
	}
	return unit
}

// unitOfScale is c's unit when its group comes in units (issue 41): the
// candidates of every node of it, tried together, or why they cannot be
// (a node that is no candidate, or decided already). nil, "": no units.
func unitOfScale(c *candidate, byName map[string]*candidate, settled map[string]bool) ([]*candidate, string) {
	mates := c.group.unitMates(c.node.Name)
	if mates == nil {
		return nil, ""
	}
	unit := make([]*candidate, 0, len(mates))
	for _, n := range mates {
		other := byName[n]
		switch {
		case other == nil:
			return []*candidate{c}, fmt.Sprintf("node %s of its unit (%s) cannot go now", n, c.group.Units[c.node.Name])
		case settled[n] && n != c.node.Name:
			return []*candidate{c}, fmt.Sprintf("node %s of its unit (%s) stays", n, c.group.Units[c.node.Name])
		}
		unit = append(unit, other)
	}
	return unit, ""
}

// memo is the pass's removalMemo, nil when the shortcut is off.
func (p *RemovalPlanner) memo() *framework.Alike {
	if p.opts.Class == nil || !p.opts.Shortcuts.On(shortcut.RemovalMemo) {
		return nil
	}
	check := p.opts.Check
	return &framework.Alike{
		Class:    p.opts.Class,
		Rejected: framework.NewRejections(),
		Verify:   check != nil && check.Verify,
		Checked:  func() { check.Checked("removal") },
		Found: func(pod, node, got, want string) {
			check.Found(shortcut.Mismatch{Shortcut: shortcut.RemovalMemo, Kind: "removal", Pod: pod, Node: node, Got: got, Want: want})
		},
	}
}

// copies are the pass's removalCopy, nil when the shortcut is off or no
// node can be keyed for the candidates' pods.
func (p *RemovalPlanner) copies(cands []*candidate) (*removal.Copies, error) {
	if p.opts.Keys == nil || p.opts.Copier == nil || !p.opts.Shortcuts.On(shortcut.RemovalCopy) {
		return nil, nil
	}
	var moving []*corev1.Pod
	for _, c := range cands {
		moving = append(moving, c.moving...)
	}
	keys, err := p.opts.Keys(moving)
	if err != nil || keys == nil {
		return nil, err
	}
	check := p.opts.Check
	return &removal.Copies{Keys: keys, Copier: p.opts.Copier,
		Checked: func() { check.Checked("removalCopy") },
		Found: func(pod, node, got, want string) {
			check.Found(shortcut.Mismatch{Shortcut: shortcut.RemovalCopy, Kind: "removalCopy", Pod: pod, Node: node, Got: got, Want: want})
		},
	}, nil
}
