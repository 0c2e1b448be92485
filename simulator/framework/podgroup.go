package framework

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// PodGroupResult is the outcome of SchedulePodGroup: every placement the
// PlacementGenerate plugins proposed, and the one the cycle chose.
type PodGroupResult struct {
	// Group names the group the cycle ran for ("PodGroup ns/name",
	// "CompositePodGroup ns/name").
	Group string
	// Placements are the candidates in name order (the scheduler's order
	// is a map's; ours is reproducible).
	Placements []PlacementOutcome
	// Chosen indexes Placements; -1 when no placement is feasible.
	Chosen int
	// Message says why none was chosen, in the scheduler's words; empty
	// when one was.
	Message string
}

// Reach is the nodes, of nodes and in their order, that some placement
// of r holds (every level's placements lie within the root's).
func (r *PodGroupResult) Reach(nodes []string) []string {
	held := map[string]bool{}
	for i := range r.Placements {
		for _, n := range r.Placements[i].Nodes {
			held[n] = true
		}
	}
	var out []string
	for _, n := range nodes {
		if held[n] {
			out = append(out, n)
		}
	}
	return out
}

// PlacementsPerNode reports whether the profile's placement generator
// puts a node in a placement by that node alone: the in-tree topology
// generator reads the node's label (and the domain of the group's
// scheduled pods); with no generator one placement holds every node. A
// node no placement of one cycle holds is then in none of a cycle over
// more nodes either.
func (r *Runner) PlacementsPerNode() bool {
	gen := r.fw.ListPlugins().PlacementGenerate.Enabled
	return len(gen) == 0 || gen[0].Name == names.TopologyPlacementGenerator
}

// Best is the chosen placement, nil when there is none.
func (r *PodGroupResult) Best() *PlacementOutcome {
	if r == nil || r.Chosen < 0 {
		return nil
	}
	return &r.Placements[r.Chosen]
}

// PlacementOutcome is one placement's trial: its members placed one by one
// with the per-pod cycle restricted to its nodes, then judged by the
// PlacementFeasible plugins.
type PlacementOutcome struct {
	// Name is what the PlacementGenerate plugin called it (the topology
	// value); empty for the one placement of all nodes.
	Name  string
	Nodes []string
	// Members are the members' cycles, by the index of the members given;
	// nil for members never tried because PlacementFeasible stopped the
	// trial early.
	Members []*ScheduleResult
	// Children are a composite's child groups' cycles inside this
	// placement, in the tree's order (GroupTree.Children after ordering);
	// nil for children never tried. Members then gathers their chosen
	// placements' members, in the order of GroupTree.Pods.
	Children []*PodGroupResult
	// Code is the final PlacementFeasible verdict (Success: feasible);
	// Plugin and Message say who rejected it and why.
	Code            fwk.Code
	Plugin, Message string
	// Score is the weighted total of the PlacementScore plugins and
	// PluginScores its parts; Scored is false when nothing was scored
	// (fewer than two feasible placements, as in the scheduler).
	Score        int64
	PluginScores []fwk.PluginScore
	Scored       bool
}

// Feasible says whether the placement can host the group.
func (o *PlacementOutcome) Feasible() bool { return o.Code == fwk.Success }

// Placed counts the members that got a node.
func (o *PlacementOutcome) Placed() int {
	n := 0
	for _, m := range o.Members {
		if m != nil && m.Node != "" {
			n++
		}
	}
	return n
}

// SchedulePodGroup runs the scheduler's pod group cycle for a leaf
// PodGroup over the named nodes; see SchedulePodGroupTree.
func (r *Runner) SchedulePodGroup(ctx context.Context, pg *schedulingv1beta1.PodGroup, members []*v1.Pod, nodes []string, keep bool) (*PodGroupResult, error) {
	return r.SchedulePodGroupTree(ctx, &GroupTree{PodGroup: pg, Members: members}, nodes, keep)
}

// SchedulePodGroupTree runs the scheduler's pod group cycle for a leaf
// PodGroup or a CompositePodGroup tree over the named nodes (existing and
// hypothetical alike): the PlacementGenerate plugins propose placements,
// the members are tried in each with the per-pod cycle restricted to its
// nodes (each in a snapshot fork, reverted) — a composite's children each
// run the cycle in turn inside the parent's placement, the winner of each
// kept for its later siblings —, PlacementFeasible judges each and
// PlacementScore picks among the feasible. With keep, the chosen
// placement's members stay in the snapshot as SchedulePod leaves a pod;
// otherwise the snapshot is left as it was. The groups and their already
// scheduled members must be in the snapshot (the plugins read them
// there); members are the unscheduled ones, tried in the given order.
//
// The loop mirrors kube-scheduler v1.37.2 schedule_one_podgroup.go
// (podGroupSchedulingAlgorithm, podGroupSchedulingPlacementAlgorithm,
// podGroupSchedulingDefaultAlgorithm, compositePodGroupSchedulingPlacementAlgorithm,
// compositePodGroupSchedulingDefaultAlgorithm, findBestPlacement), whose
// driver is unexported; every decision is a plugin's. Departures, on
// purpose (docs/design/gang-cycle.md): a member takes the first fitting
// node in the order of nodes (no per-pod Score: the caller's order is its
// cost preference), score ties go to the first placement by name instead
// of a random one, and there is no PodGroupPostFilter (no preemption).
func (r *Runner) SchedulePodGroupTree(ctx context.Context, t *GroupTree, nodes []string, keep bool) (*PodGroupResult, error) {
	return r.SchedulePodGroupTreeAlike(ctx, t, nodes, keep, nil)
}

// SchedulePodGroupTreeAlike is SchedulePodGroupTree that tries one
// placement of each kind alike says (nil: every placement) and copies its
// outcome to the others of its kind.
func (r *Runner) SchedulePodGroupTreeAlike(ctx context.Context, t *GroupTree, nodes []string, keep bool, alike *Alike) (*PodGroupResult, error) {
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("schedule pod group: %w", err)
	}
	t = t.ordered()
	if alike != nil {
		alike.copies = 0
	}
	res, err := r.scheduleTree(ctx, t, nil, nodes, keep, alike)
	if err != nil && alike != nil && alike.copies > 0 {
		// A copied placement chosen and found not to hold when kept:
		// the copy was wrong. The forks are reverted; all again, plainly.
		if alike.Found != nil {
			alike.Found(t.String(), "", err.Error(), "the chosen placement kept")
		}
		res, err = r.scheduleTree(ctx, t, nil, nodes, keep, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", t, err)
	}
	return res, nil
}

// scheduleTree is one group's cycle: parent is the placement cycle state
// of the composite it runs inside, nil for the root.
func (r *Runner) scheduleTree(ctx context.Context, t *GroupTree, parent *schedframework.CycleState, nodes []string, keep bool,
	alike *Alike) (*PodGroupResult, error) {
	pgi := t.info()
	groupState := schedframework.NewCycleState()
	if parent != nil {
		groupState.SetPlacementCycleState(parent)
	}
	placements, st, err := r.generatePlacements(ctx, groupState, pgi, nodes)
	if err != nil {
		return nil, err
	}
	res := &PodGroupResult{Group: t.String(), Chosen: -1}
	if !st.IsSuccess() {
		res.Message = st.Message()
		return res, nil
	}
	placementStates := make([]*schedframework.CycleState, len(placements))
	// One placement is chosen if feasible, unscored: kept as it is tried
	// instead of tried again.
	keepNow := keep && len(placements) == 1
	reps := map[string]int{} // a kind of placement: the one tried for it
	for i, p := range placements {
		try := func() (PlacementOutcome, *schedframework.CycleState, error) {
			out, state, err := r.tryPlacement(ctx, groupState, t, pgi, p, parent == nil, keepNow, alike)
			if err == nil && ctx.Err() != nil {
				// Plugins cut short (the DRA allocator stops when asked)
				// answer "does not fit": an outcome nobody may plan on, or
				// compare with a copy in verify mode.
				err = ctx.Err()
			}
			return out, state, err
		}
		var key string
		if alike != nil && !keepNow {
			key = alike.Key(t, nodeNames(p.Nodes))
		}
		var out PlacementOutcome
		var state *schedframework.CycleState
		if j, ok := reps[key]; ok && key != "" {
			out, state, err = r.tryAlike(alike, t, &res.Placements[j], placementStates[j], p.Name, nodeNames(p.Nodes), try)
		} else {
			out, state, err = try()
			if key != "" && err == nil {
				reps[key] = i
			}
		}
		if err != nil {
			return nil, fmt.Errorf("in placement %q: %w", p.Name, err)
		}
		res.Placements = append(res.Placements, out)
		placementStates[i] = state
	}
	if err := r.choosePlacement(ctx, groupState, pgi, placements, placementStates, res); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	best := res.Best()
	if best == nil {
		logger.V(4).Info("Pod group fits no placement", "podGroup", t.String(), "placements", len(placements), "why", res.Message)
		return res, nil
	}
	logger.V(4).Info("Pod group placement chosen", "podGroup", t.String(), "placement", best.Name, "placed", best.Placed(), "placements", len(placements))
	if v := logger.V(5); v.Enabled() {
		for _, p := range res.Placements {
			v.Info("Pod group placement scored", "podGroup", t.String(), "placement", p.Name, "feasible", p.Feasible(), "score", p.Score, "plugins", p.PluginScores)
		}
	}
	if !keep || keepNow {
		return res, nil
	}
	if t.Composite == nil {
		err = r.keepPlacement(ctx, groupState, t.Members, best)
	} else {
		// assumeSubtreeWithRevert: the chosen subtree again, kept.
		var again PlacementOutcome
		again, _, err = r.tryPlacement(ctx, groupState, t, pgi, placements[res.Chosen], parent == nil, true, alike)
		if err == nil && !again.Feasible() {
			err = fmt.Errorf("no longer feasible: %s", again.Message)
		}
		best.Members, best.Children = again.Members, again.Children
	}
	if err != nil {
		return nil, fmt.Errorf("keep placement %q: %w", best.Name, err)
	}
	return res, nil
}

// generatePlacements returns the candidate placements, sorted by name.
// Without TopologyAwareWorkloadScheduling the scheduler runs no generator:
// one implicit placement of all nodes (podGroupSchedulingAlgorithm).
// A non-success status other than Error (no placement found) is returned
// as is; an Error is an error.
func (r *Runner) generatePlacements(ctx context.Context, groupState *schedframework.CycleState, pgi *schedframework.PodGroupInfo,
	nodes []string) ([]*fwk.Placement, *fwk.Status, error) {
	infos := make([]fwk.NodeInfo, 0, len(nodes))
	for _, name := range nodes {
		ni, err := r.snap.Get(name)
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: %w", name, err)
		}
		infos = append(infos, ni)
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.TopologyAwareWorkloadScheduling) {
		return []*fwk.Placement{{Nodes: infos}}, nil, nil
	}
	placements, st := r.fw.RunPlacementGeneratePlugins(ctx, groupState, pgi, infos)
	if st.IsError() {
		return nil, nil, fmt.Errorf("PlacementGenerate: %w", st.AsError())
	}
	if !st.IsSuccess() {
		return nil, st, nil
	}
	sort.SliceStable(placements, func(i, j int) bool { return placements[i].Name < placements[j].Name })
	return placements, nil, nil
}

// tryPlacement tries the group in one placement, in a fork it reverts
// (commits with keep when feasible: the chosen placement), as
// podGroupSchedulingDefaultAlgorithm does between AssumePlacement and
// placementRevertFns.revert. It returns the outcome and the placement
// cycle state the scoring plugins get. root says the group is the cycle's
// root: only there must a member have been placed (runRootSchedulingAlgorithm).
func (r *Runner) tryPlacement(ctx context.Context, groupState *schedframework.CycleState, t *GroupTree, pgi *schedframework.PodGroupInfo,
	p *fwk.Placement, root, keep bool, alike *Alike) (out PlacementOutcome, placementState *schedframework.CycleState, err error) {
	out = PlacementOutcome{Name: p.Name, Nodes: nodeNames(p.Nodes)}
	placementState = schedframework.NewCycleState()
	placementState.SetPodGroupSchedulingCycle(groupState)
	r.snap.Fork()
	defer func() { r.closeFork(keep && err == nil && out.Feasible(), &err) }()
	var st *fwk.Status
	if t.Composite != nil {
		st, err = r.tryChildren(ctx, placementState, t, pgi, &out, alike)
	} else {
		st, err = r.tryMembers(ctx, placementState, pgi, &out, alike)
	}
	if err != nil {
		return out, nil, err
	}
	if st.IsError() {
		return out, nil, fmt.Errorf("PlacementFeasible: %w", st.AsError())
	}
	// A final Wait (minCount not reached) is Unschedulable, as upstream.
	out.Code, out.Message = st.Code(), st.Message()
	if st != nil {
		out.Plugin = st.Plugin()
	}
	if out.Code == fwk.Wait {
		out.Code = fwk.Unschedulable
	}
	if root && out.Code == fwk.Success && out.Placed() == 0 {
		out.Code, out.Message = fwk.Unschedulable, "no member of the pod group was placed"
	}
	return out, placementState, nil
}

func nodeNames(infos []fwk.NodeInfo) []string {
	out := make([]string, len(infos))
	for i, ni := range infos {
		out[i] = ni.Node().Name
	}
	return out
}

// tryMembers places a leaf's members one by one, PlacementFeasible after
// each (podGroupSchedulingDefaultAlgorithm).
func (r *Runner) tryMembers(ctx context.Context, placementState *schedframework.CycleState, pgi *schedframework.PodGroupInfo, out *PlacementOutcome, alike *Alike) (*fwk.Status, error) {
	out.Members = make([]*ScheduleResult, len(pgi.UnscheduledPods))
	groupNow, err := r.snap.PodGroupStates().Get(pgi.Namespace, pgi.Name)
	if err != nil {
		return nil, fmt.Errorf("pod group state: %w", err)
	}
	progress := schedframework.PlacementProgress{Remaining: len(pgi.UnscheduledPods), Scheduled: groupNow.ScheduledPodsCount()}
	st := r.fw.RunPlacementFeasiblePlugins(ctx, placementState, pgi, progress)
	newState := func() *schedframework.CycleState { return memberState(placementState) }
	for i, pod := range pgi.UnscheduledPods {
		if st.IsError() || st.Code() == fwk.Unschedulable {
			break
		}
		// The first fitting node in order, found in chunks that each
		// list only their nodes' slices (see chunks): the node
		// schedulePodIn would pick, without filtering the nodes after it.
		res, err := r.schedulePodFirstFitIn(ctx, newState, pod, nil, out.Nodes, alike.known(pod))
		if err != nil {
			return nil, err
		}
		out.Members[i] = res
		progress.Remaining--
		if res.Node != "" {
			progress.Scheduled++
		}
		st = r.fw.RunPlacementFeasiblePlugins(ctx, placementState, pgi, progress)
	}
	return st, nil
}

// scopeSlices lists only the slices of nodes (and those bound to no node)
// to the DRA plugin until the returned func puts the caller's scope back:
// a member's cycle reads no other node's, and the plugin's PreFilter
// indexes every listed slice (snapshot.ScopeSlices; the estimator scopes
// its cycles the same way).
func (r *Runner) scopeSlices(nodes []string) func() {
	prev := r.snap.SliceScope()
	r.snap.ScopeSlices(nodes)
	return func() { r.snap.ScopeSlices(prev) }
}

// memberState is the per-pod cycle state of a member
// (initPodSchedulingContext): it carries the group and placement states,
// which plugins such as DynamicResources share across members.
func memberState(placementState *schedframework.CycleState) *schedframework.CycleState {
	state := schedframework.NewCycleState()
	state.Write(schedframework.PodsToActivateKey, schedframework.NewPodsToActivate())
	state.SetPodGroupSchedulingCycle(placementState.GetPodGroupSchedulingCycle())
	state.SetPlacementCycleState(placementState)
	return state
}

// choosePlacement sets res.Chosen as findBestPodGroupPlacement does: none
// feasible, the scheduler's message; one, that one unscored; several,
// the highest PlacementScore total, the first by name on a tie.
func (r *Runner) choosePlacement(ctx context.Context, groupState *schedframework.CycleState, pgi *schedframework.PodGroupInfo,
	placements []*fwk.Placement, states []*schedframework.CycleState, res *PodGroupResult) error {
	var feasible []int
	for i := range res.Placements {
		if res.Placements[i].Feasible() {
			feasible = append(feasible, i)
		}
	}
	switch len(feasible) {
	case 0:
		first := "none generated"
		if len(res.Placements) > 0 {
			first = res.Placements[0].Message
		}
		res.Message = fmt.Sprintf("0/%d placements are available, first placement status: %s", len(res.Placements), first)
		return nil
	case 1:
		res.Chosen = feasible[0]
		return nil
	}
	assignments := make([]*fwk.PodGroupAssignments, len(feasible))
	placementStates := make([]fwk.PlacementCycleState, len(feasible))
	for k, i := range feasible {
		a, err := proposedAssignments(res.Placements[i].Members, states[i])
		if err != nil {
			return err
		}
		assignments[k] = &fwk.PodGroupAssignments{Placement: placements[i], ProposedAssignments: a}
		placementStates[k] = states[i]
	}
	scores, st := r.fw.RunPlacementScorePlugins(ctx, groupState, pgi, assignments, placementStates)
	if !st.IsSuccess() {
		return fmt.Errorf("PlacementScore: %w", st.AsError())
	}
	for k, i := range feasible {
		p := &res.Placements[i]
		p.Score, p.PluginScores, p.Scored = scores[k].TotalScore, scores[k].Scores, true
		if res.Chosen < 0 || scores[k].TotalScore > res.Placements[res.Chosen].Score {
			res.Chosen = i
		}
	}
	return nil
}

// assignment is one member's proposed node (fwk.ProposedAssignment), as
// makeProposedAssignments builds them from the members that got a node.
type assignment struct {
	res   *ScheduleResult
	info  fwk.PodInfo
	state fwk.CycleState
}

func (a *assignment) GetPod() *v1.Pod               { return a.res.Pod }
func (a *assignment) GetPodInfo() fwk.PodInfo       { return a.info }
func (a *assignment) GetNodeName() string           { return a.res.Node }
func (a *assignment) GetCycleState() fwk.CycleState { return a.state }

func proposedAssignments(members []*ScheduleResult, placementState *schedframework.CycleState) ([]fwk.ProposedAssignment, error) {
	var out []fwk.ProposedAssignment
	for _, m := range members {
		if m == nil || m.Node == "" {
			continue
		}
		info, err := schedframework.NewPodInfo(m.Pod)
		if err != nil {
			return nil, fmt.Errorf("pod info of %s/%s: %w", m.Pod.Namespace, m.Pod.Name, err)
		}
		out = append(out, &assignment{res: m, info: info, state: memberState(placementState)})
	}
	return out, nil
}

// keepPlacement places the chosen members again, each on its own node, and
// keeps them, as assumeSubtreeWithRevert assumes the best result: all or
// nothing.
func (r *Runner) keepPlacement(ctx context.Context, groupState *schedframework.CycleState, members []*v1.Pod, best *PlacementOutcome) (err error) {
	r.snap.Fork()
	keep := false
	defer func() { r.closeFork(keep, &err) }()
	placementState := schedframework.NewCycleState()
	placementState.SetPodGroupSchedulingCycle(groupState)
	defer r.scopeSlices(best.Nodes)()
	for i, m := range best.Members {
		if m == nil || m.Node == "" {
			continue
		}
		res, err := r.schedulePodIn(ctx, memberState(placementState), members[i], nil, []string{m.Node})
		if err != nil {
			return err
		}
		if res.Node != m.Node {
			return fmt.Errorf("member %s/%s no longer fits %s", members[i].Namespace, members[i].Name, m.Node)
		}
		best.Members[i] = res
	}
	keep = true
	return nil
}
