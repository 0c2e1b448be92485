package plan

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// planGangCycle plans a gang with the scheduler's own pod group cycle
// (Options.GangCycle, docs/design/gang-cycle.md): the PlacementGenerate,
// per-pod, PlacementFeasible and PlacementScore plugins decide the domain,
// the members on existing nodes and those on each new node, over existing
// nodes and template instances alike. ran is false when the cycle cannot
// run (the PodGroup is not in the snapshot: GenericWorkload off; a
// ProvisioningRequest's gang brings its own, g.Group): the caller plans
// the gang itself.
//
// The cycle runs over:
//  1. existing and coming nodes alone: a placement there is the one the
//     scheduler makes now, kept; nothing is bought;
//  2. those plus, in a fork it reverts, as many instances of each group as
//     its estimate for all members needs (within its room);
//  3. those plus only the instances some feasible placement of run 2 used,
//     in a fork it reverts: unused instances would dilute NodeResourcesFit's
//     placement score, and the scheduler after the scale-up never sees
//     them. Its choice is the plan;
//  4. the chosen placement's nodes and used instances, for good: the same
//     first fit, its members kept.
//
// A gang alike to one planned before it in the stage, offered the same,
// takes that gang's decision of runs 2 and 3 (gangReplay).
func (p *Planner) planGangCycle(ctx context.Context, runner *framework.Runner, g *gang.Gang, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time, st gangStage) (GangOutcome, bool, error) {
	logger := klog.FromContext(ctx)
	o := GangOutcome{Gang: g}
	name := g.Name
	if g.Group != nil {
		// Stays with the members the caller keeps (its fork decides).
		if err := runner.Snapshot().SetPodGroup(g.Group); err != nil {
			logger.V(4).Info("Pod group cycle cannot run, planning the gang without it", "gang", g.Key(), "err", err)
			return o, false, nil
		}
		name = g.Group.Name
	}
	tree, err := runner.GroupTree(g.Namespace, name, g.Composite, g.Pending)
	if err != nil {
		if g.Composite {
			// Nothing else can plan a tree; the pass goes on without it.
			o.Message = fmt.Sprintf("gang %s: its CompositePodGroup tree is not in the simulation: %v", g.Key(), err)
			logger.Info("Gang not planned", "gang", g.Key(), "why", o.Message)
			return o, true, nil
		}
		logger.V(4).Info("Pod group cycle cannot run, planning the gang without it", "gang", g.Key(), "err", err)
		return o, false, nil
	}
	members := tree.Pods()
	// One key of alike placements for the gang's every run: the node
	// keys it caches hold across them.
	alike := p.estimate.AlikePlacements(tree, st.keys)
	first := st.labelled(runner, tree, candidates, alike)
	res, err := runner.SchedulePodGroupTreeAlike(ctx, tree, first, true, alike)
	if err != nil {
		return o, true, err
	}
	checkLabelled(runner, alike, tree, res)
	if best := res.Best(); best != nil {
		o.FitsExisting, o.Domain, o.Existing, o.Tried = true, best.Name, placedOn(best, members, candidates), triesOf(res)
		return o, true, nil
	}

	candidates, left := narrowed(runner, res, first, alike)
	kind := ""
	if alike != nil {
		kind = p.estimate.GangKind(tree)
	}
	var input *gangReplay
	var gates []gateSig
	if kind != "" {
		input = inputOf(runner, candidates)
		gates = p.gateSigs(groups, usage, now, g.Pending)
	}
	log := &reasonLog{}
	var all []instanceSet
	var names []string
	var options []expander.Option
	var replay *gangReplay
	reused := false
	cycle := func() error {
		var err error
		res, names, err = p.runCycle(ctx, runner, st, tree, candidates, all, alike)
		checkNarrowed(alike, res, left)
		return err
	}
	err = p.forked(runner, func() error {
		prior := st.sameInput(runner, kind, candidates)
		var err error
		if options = p.optionsFor(prior, g.Pending, groups, gates, now); options != nil && !alike.Verify {
			reused = true
			p.reusedOptions++
		} else {
			again := options
			if options, err = p.options(ctx, groups, nil, g.Pending, usage, now, log, nil); err != nil {
				return err
			}
			checkOptions(alike, tree, again, options)
		}
		all = p.instanceSets(tree.TopologyKeys(), rankOptions(p.chain, options, g.Need()), groups)
		if prior != nil && slices.Equal(prior.all, all) {
			if replay = prior; !alike.Verify {
				return nil
			}
		}
		return cycle()
	})
	if err != nil {
		return o, true, err
	}
	if replay != nil && !alike.Verify {
		kept, err := p.keepGangCycle(ctx, runner, st, tree, g, replay.keep, replay.chosen, alike)
		switch {
		case err == nil:
			for _, up := range kept.ScaleUps {
				p.take(up.Group, up.Delta, up.Pods)
			}
			kept.Tried = replay.triesFor(tree)
			p.replayed++
			logger.V(4).Info("Pod group cycle planned the gang as an alike one before it", "gang", g.Key(), "placement", kept.Domain,
				"scaleUps", len(kept.ScaleUps))
			return kept, true, nil
		case ctx.Err() != nil:
			return o, true, err
		}
		// Not as the alike gang after all: the runs decide.
		logger.V(4).Info("Replaying an alike gang's plan failed, running the cycle", "gang", g.Key(), "err", err)
		delete(st.replays, kind)
		err = p.forked(runner, func() error {
			if reused {
				// What each group lacks, should the cycle find no placement.
				if _, err := p.options(ctx, groups, nil, g.Pending, usage, now, log, nil); err != nil {
					return err
				}
			}
			return cycle()
		})
		if err != nil {
			return o, true, err
		}
	}
	if res.Best() == nil {
		o.Message = fmt.Sprintf("gang %s needs %d more member(s) placed to reach minCount %d; the scheduler's pod group cycle finds no placement: %s%s",
			g.Key(), g.Need(), g.MinCount, res.Message, unitNotes(runner, all, strings.Join(tree.TopologyKeys(), ",")))
		reasons := p.resolve(ctx, []*reasonLog{log}, g.Pending)
		for _, pod := range g.Pending {
			o.Reasons = append(o.Reasons, reasons[pod.UID]...)
		}
		o.Reasons = dedupe(o.Reasons)
		o.Tried = triesOf(res)
		return o, true, nil
	}

	// Every domain's verdict is the first run's, over all the instances
	// the groups could add; the second run sees only the ones used.
	tried := triesOf(res)
	keep := feasible
	if pl := preferred(res, all, names); pl != nil {
		keep = func(o *framework.PlacementOutcome) bool { return o == pl }
	}
	used := usedBy(res, all, names, keep)
	err = p.forked(runner, func() error {
		res, names, err = p.runCycle(ctx, runner, st, tree, candidates, used, alike)
		checkNarrowed(alike, res, left)
		return err
	})
	if err != nil {
		return o, true, err
	}
	best := res.Best()
	if best == nil {
		return o, true, fmt.Errorf("gang %s: no placement once unused instances are dropped: %s", g.Key(), res.Message)
	}
	chosen := usedBy(res, used, names, func(pl *framework.PlacementOutcome) bool { return pl == best })
	keepOn := inPlacement(candidates, best)
	checkReplay(alike, tree, replay, best.Name, keepOn, chosen)
	o, err = p.keepGangCycle(ctx, runner, st, tree, g, keepOn, chosen, alike)
	if err != nil {
		return o, true, err
	}
	for _, up := range o.ScaleUps {
		p.take(up.Group, up.Delta, up.Pods)
	}
	o.Tried = tried
	if kind != "" {
		input.all, input.keep, input.chosen, input.domain, input.tried = all, keepOn, chosen, best.Name, tried
		input.groups = groupNames(tree, nil)
		p.keepOptions(input, options, g.Pending, gates)
		st.replays[kind] = input
	}
	logger.V(4).Info("Pod group cycle planned the gang", "gang", g.Key(), "placement", best.Name, "score", best.Score,
		"placements", len(res.Placements), "scaleUps", len(o.ScaleUps))
	return o, true, nil
}

// narrowed is candidates less the nodes no placement of first (the
// cycle's run over them alone) holds, for the gang's later runs: the
// placement generator puts a node in a placement by that node alone
// (framework.Runner.PlacementsPerNode), so a node it left out of every
// placement then is in none once instances are added, and the later runs
// need not offer it again (thousands of nodes without the gang's
// topology label, read by the generator three times more a gang). Part
// of the alikePlacements shortcut: without it all candidates stay; in
// verify mode they stay too, and left is the nodes it would leave out,
// for checkNarrowed.
func narrowed(runner *framework.Runner, first *framework.PodGroupResult, candidates []string,
	alike *framework.Alike) (kept []string, left map[string]bool) {
	if alike == nil || !runner.PlacementsPerNode() {
		return candidates, nil
	}
	reach := first.Reach(candidates)
	if !alike.Verify {
		return reach, nil
	}
	if len(reach) == len(candidates) {
		return candidates, nil
	}
	left = make(map[string]bool, len(candidates)-len(reach))
	for _, n := range candidates {
		left[n] = true
	}
	for _, n := range reach {
		delete(left, n)
	}
	return candidates, left
}

// checkNarrowed tells alike (verify mode) when a placement of res, at any
// level, holds a node narrowed would have left out.
func checkNarrowed(alike *framework.Alike, res *framework.PodGroupResult, left map[string]bool) {
	if len(left) == 0 || res == nil {
		return
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	if group, pl, node := holding(res, left); node != "" && alike.Found != nil {
		alike.Found(group, pl, "placement holds node "+node,
			"no placement holds a node the gang's first run placed nowhere (the cycle's runs over more nodes were narrowed)")
	}
}

// holding finds a placement of res, at any level, holding one of nodes.
func holding(res *framework.PodGroupResult, nodes map[string]bool) (group, placement, node string) {
	for i := range res.Placements {
		pl := &res.Placements[i]
		for _, n := range pl.Nodes {
			if nodes[n] {
				return res.Group, pl.Name, n
			}
		}
		for _, c := range pl.Children {
			if c == nil {
				continue
			}
			if g, p, n := holding(c, nodes); n != "" {
				return g, p, n
			}
		}
	}
	return "", "", ""
}

// keepGangCycle adds the chosen instances and keeps the members where one
// last cycle, over the chosen placement's nodes only, puts them (the
// run it was chosen in, first fit over the same nodes in the same order),
// all or nothing.
func (p *Planner) keepGangCycle(ctx context.Context, runner *framework.Runner, st gangStage, tree *framework.GroupTree, g *gang.Gang,
	candidates []string, chosen []instanceSet, alike *framework.Alike) (o GangOutcome, err error) {
	o = GangOutcome{Gang: g}
	snap := runner.Snapshot()
	snap.Fork()
	kept := false
	defer func() {
		end := snap.Revert
		if kept {
			end = snap.Commit
		}
		if eerr := end(); eerr != nil && err == nil {
			err = eerr
		}
	}()
	names, err := addInstances(ctx, runner, st.instances, chosen)
	if err != nil {
		return o, err
	}
	res, err := runner.SchedulePodGroupTreeAlike(ctx, tree, append(slices.Clone(candidates), names...), true, alike)
	if err != nil {
		return o, err
	}
	best := res.Best()
	if best == nil {
		return o, fmt.Errorf("gang %s: the chosen placement no longer hosts the gang: %s", g.Key(), res.Message)
	}
	members := tree.Pods()
	o.Domain, o.Existing = best.Name, placedOn(best, members, candidates)
	on := map[string][]*corev1.Pod{}
	for i, m := range best.Members {
		if m != nil && m.Node != "" {
			on[m.Node] = append(on[m.Node], members[i])
		}
	}
	i := 0
	for _, set := range chosen {
		up := act.ScaleUp{Group: set.group, Atomic: true, Gang: g.Key()}
		for _, name := range names[i : i+set.count] {
			if len(on[name]) == 0 {
				continue // first fit left it empty: not bought
			}
			up.Delta++
			up.Nodes = append(up.Nodes, on[name])
			up.Pods = append(up.Pods, on[name]...)
		}
		i += set.count
		if up.Delta > 0 {
			o.ScaleUps = append(o.ScaleUps, toUnits(up))
		}
	}
	kept = true
	return o, nil
}

// instanceSet is count instances of a group's template, tmpl being the
// template as the cycle sees it (a per-request topology value set).
type instanceSet struct {
	group *nodegroups.Info
	tmpl  *cloudprovider.NodeTemplate
	count int
	// overUnit, when the group's estimate wanted more nodes than a unit
	// has, is how many: the gang's new domain of this group is one unit.
	overUnit int
}

// unitNotes are the sets' unit notes, for a gang no placement takes
// (made only then: they read every node of the group).
func unitNotes(runner *framework.Runner, sets []instanceSet, keys string) string {
	var notes []string
	for _, set := range sets {
		if set.overUnit > 0 {
			notes = append(notes, unitNote(runner, set.group, set.count, keys, set.overUnit))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// unitNote says that a gang would need more new nodes of g than one unit
// has, and what the registered units have free.
func unitNote(runner *framework.Runner, g *nodegroups.Info, unit int, keys string, need int) string {
	note := fmt.Sprintf("a new unit of %s is %d nodes, one domain of %s, and the members would need %d", g.Id, unit, keys, need)
	idle := map[string]int{}
	for _, node := range g.Ready {
		k := g.Template.UnitOf(node)
		if _, seen := idle[k]; !seen {
			idle[k] = 0 // a unit with no idle node counts too
		}
		ni, err := runner.Snapshot().NodeInfos().Get(node.Name)
		if err != nil {
			continue
		}
		busy := false
		for _, pi := range ni.GetPods() {
			if !template.StartsByItself(pi.GetPod()) {
				busy = true
				break
			}
		}
		if !busy {
			idle[k]++
		}
	}
	if len(idle) > 0 {
		most := 0
		for _, n := range idle {
			most = max(most, n)
		}
		note += fmt.Sprintf("; the most idle nodes in one of its %d registered units is %d", len(idle), most)
	}
	return note
}

// instanceSets are the instances the options call for, in their rank
// order. A gang with topology keys (one per level of its tree) gets none
// of groups without a value for each: they would join no placement. A
// group whose provider picks a value per request gets one of its own,
// newDomain, that no node has: its instances are one new domain at that
// level, as one atomic request of it is. Groups sharing a reservation
// share its room: each takes what it may, in rank order (the caller's
// fork undoes the bookings).
func (p *Planner) instanceSets(keys []string, ranked []expander.Option, groups []*nodegroups.Info) []instanceSet {
	var out []instanceSet
next:
	for _, opt := range ranked {
		grp := groupByID(groups, opt.NodeGroup)
		if grp == nil || grp.Template == nil {
			continue
		}
		tmpl := grp.Template
		perRequest := false
		for _, key := range keys {
			if _, ok := tmpl.Node.Labels[key]; ok {
				continue
			}
			if !tmpl.TopologyPerRequest(key) {
				continue next
			}
			if tmpl == grp.Template {
				tmpl = tmpl.DeepCopy()
			}
			tmpl.Node.Labels[key] = newDomain(grp.Id)
			perRequest = true
		}
		n := p.reservedRoom(grp, opt.Pods, opt.NodeCount)
		over := 0
		if unit, _ := grp.Template.UnitSize(); perRequest && unit > 1 && n > unit {
			// One new domain is one unit: no more of its nodes share it.
			over, n = opt.NodeCount, unit
		}
		if n <= 0 {
			continue
		}
		p.take(grp, n, opt.Pods)
		out = append(out, instanceSet{group: grp, tmpl: tmpl, count: n, overUnit: over})
	}
	return out
}

// newDomain names the domain one new request of group id makes: no label
// value can be spelt so (a value has no spaces).
func newDomain(id string) string { return "new request of " + id }

// rankOptions orders the options as the old loop preferred them: those
// hosting the whole need first, in the expander chain's order, then the
// rest biggest first. Members fill nodes first fit in this order.
func rankOptions(chain expander.Chain, options []expander.Option, need int) []expander.Option {
	var whole, rest []expander.Option
	for _, opt := range options {
		if len(opt.Pods) >= need {
			whole = append(whole, opt)
		} else {
			rest = append(rest, opt)
		}
	}
	var out []expander.Option
	for len(whole) > 0 {
		best := chain.Choose(whole)
		out = append(out, *best)
		whole = slices.DeleteFunc(whole, func(o expander.Option) bool { return o.NodeGroup == best.NodeGroup })
	}
	sort.SliceStable(rest, func(i, j int) bool { return len(rest[i].Pods) > len(rest[j].Pods) })
	return append(out, rest...)
}

// runCycle adds sets' instances and runs the cycle over candidates and
// them, members trying existing nodes first, then the instances in order;
// it returns the instances' names, in that order.
func (p *Planner) runCycle(ctx context.Context, runner *framework.Runner, st gangStage, tree *framework.GroupTree,
	candidates []string, sets []instanceSet, alike *framework.Alike) (*framework.PodGroupResult, []string, error) {
	names, err := addInstances(ctx, runner, st.instances, sets)
	if err != nil {
		return nil, nil, err
	}
	res, err := runner.SchedulePodGroupTreeAlike(ctx, tree, append(slices.Clone(candidates), names...), false, alike)
	return res, names, err
}

// addInstances adds each set's instances, named as the estimator names
// new nodes (the first free "<group>-template-<i>"), so reservations and
// nominations see the names they expect.
func addInstances(ctx context.Context, runner *framework.Runner, made *template.Instances, sets []instanceSet) ([]string, error) {
	var names []string
	for _, set := range sets {
		next := 0
		for range set.count {
			var name string
			for {
				name = fmt.Sprintf("%s-template-%d", set.group.Id, next)
				next++
				if !runner.Snapshot().HasNode(name) {
					break
				}
			}
			if err := made.AddInstance(ctx, runner, set.tmpl, name); err != nil {
				return nil, fmt.Errorf("node group %s: %w", set.group.Id, err)
			}
			names = append(names, name)
		}
	}
	return names, nil
}

func feasible(pl *framework.PlacementOutcome) bool { return pl.Feasible() }

// preferred is, among the placements the scheduler scores as high as its
// choice, the one buying fewest new nodes, then from the best ranked
// groups (sets are in the expander chain's order, rankOptions; a
// placement ranks by the worst set it uses), when that is not its choice
// already; nil otherwise. The scheduler will see only the nodes bought,
// so which of two equal placements to buy is the autoscaler's choice: a
// unit on a reservation before one on demand, the cheaper group before
// the dearer.
func preferred(res *framework.PodGroupResult, sets []instanceSet, names []string) *framework.PlacementOutcome {
	best := res.Best()
	if best == nil || !best.Scored {
		return nil
	}
	setOf := make(map[string]int, len(names))
	i := 0
	for k, set := range sets {
		for _, name := range names[i : i+set.count] {
			setOf[name] = k
		}
		i += set.count
	}
	// cost is how many new nodes pl buys and its rank.
	cost := func(pl *framework.PlacementOutcome) [2]int {
		worst, nodes := -1, map[string]bool{}
		for _, m := range pl.Members {
			if m == nil || m.Node == "" {
				continue
			}
			if k, ok := setOf[m.Node]; ok {
				nodes[m.Node] = true
				worst = max(worst, k)
			}
		}
		return [2]int{len(nodes), worst}
	}
	out, least := best, cost(best)
	for i := range res.Placements {
		pl := &res.Placements[i]
		if !pl.Feasible() || pl.Score != best.Score {
			continue
		}
		if c := cost(pl); c[0] < least[0] || c[0] == least[0] && c[1] < least[1] {
			out, least = pl, c
		}
	}
	if out == best {
		return nil
	}
	return out
}

// usedBy narrows sets (whose instances, named names in order, the run
// res was over) to the instances a member of a placement keep accepts was
// put on. All instances of a group being alike, only the counts matter.
func usedBy(res *framework.PodGroupResult, sets []instanceSet, names []string, keep func(*framework.PlacementOutcome) bool) []instanceSet {
	used := map[string]bool{}
	for i := range res.Placements {
		pl := &res.Placements[i]
		if !keep(pl) {
			continue
		}
		for _, m := range pl.Members {
			if m != nil && m.Node != "" {
				used[m.Node] = true
			}
		}
	}
	var out []instanceSet
	i := 0
	for _, set := range sets {
		n := 0
		for _, name := range names[i : i+set.count] {
			if used[name] {
				n++
			}
		}
		i += set.count
		if n > 0 {
			out = append(out, instanceSet{group: set.group, tmpl: set.tmpl, count: n})
		}
	}
	return out
}

// placedOn are the members a placement puts on candidate nodes.
func placedOn(pl *framework.PlacementOutcome, members []*corev1.Pod, candidates []string) map[*corev1.Pod]string {
	real := make(map[string]bool, len(candidates))
	for _, name := range candidates {
		real[name] = true
	}
	var out map[*corev1.Pod]string
	for i, m := range pl.Members {
		if m == nil || m.Node == "" || !real[m.Node] {
			continue
		}
		if out == nil {
			out = map[*corev1.Pod]string{}
		}
		out[members[i]] = m.Node
	}
	return out
}

// inPlacement are the candidates among a placement's nodes, in order.
func inPlacement(candidates []string, pl *framework.PlacementOutcome) []string {
	in := make(map[string]bool, len(pl.Nodes))
	for _, name := range pl.Nodes {
		in[name] = true
	}
	var out []string
	for _, name := range candidates {
		if in[name] {
			out = append(out, name)
		}
	}
	return out
}

// forked runs fn in a snapshot fork it reverts, undoing the reservation
// bookings fn makes.
func (p *Planner) forked(runner *framework.Runner, fn func() error) error {
	return p.keptIf(runner, func() (bool, error) { return false, fn() })
}

// keptIf runs fn in a snapshot fork and keeps what it did when it says so
// without error; otherwise the fork is reverted and the reservation
// bookings fn made are undone.
func (p *Planner) keptIf(runner *framework.Runner, fn func() (bool, error)) error {
	snap := runner.Snapshot()
	snap.Fork()
	restore := p.markCapacity()
	keep, err := fn()
	if keep && err == nil {
		return snap.Commit()
	}
	restore()
	if rerr := snap.Revert(); err == nil {
		err = rerr
	}
	return err
}

// triesOf is what the cycle's run found of each placement: the verdict of
// the plugin that rejected it, or its score.
// A CompositePodGroup's placements are followed by its children's, each
// named by the path of domains to it ("b1 › r3") and its message by the
// child group.
func triesOf(res *framework.PodGroupResult) []DomainTry {
	return triesUnder(res, "", "")
}

func triesUnder(res *framework.PodGroupResult, path, group string) []DomainTry {
	out := make([]DomainTry, 0, len(res.Placements))
	best := res.Best()
	for i := range res.Placements {
		pl := &res.Placements[i]
		t := DomainTry{Domain: path + pl.Name, Feasible: pl.Feasible()}
		switch {
		case !t.Feasible:
			t.Message = strings.TrimPrefix(pl.Plugin+": "+pl.Message, ": ")
		case pl.Scored && best != nil && pl != best && pl.Score == best.Score:
			// The scheduler breaks this tie at random (findBestPlacement):
			// it may take this one where the plan took the other.
			t.Message = fmt.Sprintf("score %d, tied with %s (the scheduler picks one of them at random)", pl.Score, best.Name)
		case pl.Scored:
			t.Message = fmt.Sprintf("score %d", pl.Score)
		}
		if group != "" {
			t.Message = strings.TrimSuffix(group+": "+t.Message, ": ")
		}
		out = append(out, t)
		for _, c := range pl.Children {
			if c != nil {
				out = append(out, triesUnder(c, t.Domain+" › ", c.Group)...)
			}
		}
	}
	return out
}
