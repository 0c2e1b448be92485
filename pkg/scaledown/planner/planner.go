// Package planner decides which nodes scale-down removes: it finds the
// underutilized nodes that nobody protects (eligibility), works out what
// would happen to each of their pods (drainability, PodDisruptionBudgets,
// gangs), checks with the real scheduler framework that every pod that
// must move fits elsewhere (simulator/removal), remembers for how long
// each node has been unneeded, and picks, within the group minimums and
// the parallelism limits, the nodes to remove now.
package planner

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/objorder"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/unneeded"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/removal"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/utilization"
)

// Reasons a node is unremovable besides those of eligibility and
// drainability (upstream's names).
const (
	NodeGroupMinSizeReached = "NodeGroupMinSizeReached"
	NoPlaceToMovePods       = "NoPlaceToMovePods"
	// UnitNotWhole: the node's group comes in units (racks, NVLink
	// domains) and not every node of its unit can go now.
	UnitNotWhole    = "UnitNotWhole"
	NotEvaluated    = "NotUnneededOtherReason"
	UnexpectedError = "UnexpectedError"
	// PodsNominated: a pending pod is nominated for the node (by the
	// scheduler's preemption or by this autoscaler's plan), so the
	// scheduler means to bind it there.
	PodsNominated = "PodsNominated"
)

// Options are the planner's knobs.
type Options struct {
	Thresholds   eligibility.Thresholds
	Rules        drainability.Rules
	UnneededTime time.Duration
	// UnreadyEnabled lets unready nodes go, once unneeded for
	// UnreadyTime (--scale-down-unready-enabled, --scale-down-unready-time).
	UnreadyEnabled bool
	UnreadyTime    time.Duration
	// MaxParallelism bounds the nodes removed per pass
	// (--max-scale-down-parallelism).
	MaxParallelism int
	// MaxDrainParallelism bounds the non-empty nodes among them.
	MaxDrainParallelism int
	// MaxNonEmptyCandidates bounds the nodes with pods whose removal is
	// simulated per pass; nodes unneeded before go first.
	MaxNonEmptyCandidates int
	// Policies may keep nodes and order removals (see NodePolicy).
	Policies []NodePolicy
	// Class is the estimator's class of a pod whose verdict on a node
	// depends on that node alone ("" for the others): with Shortcuts
	// allowing removalMemo, the removal simulation keeps their verdicts
	// "does not fit" per node generation. nil: no memo.
	Class func(pod *corev1.Pod) string
	// Keys makes the node keys for a pass's moving pods
	// (estimator.NewNodeKeys; nil keys: no node is like another), and
	// Copier copies placements between nodes of one key (the
	// estimator): with the memo and Shortcuts allowing removalCopy, the
	// removal simulation copies a class's placements between
	// destinations of one key. Either nil: no copies.
	Keys      func(pods []*corev1.Pod) (removal.DestinationKeys, error)
	Copier    removal.PlacementCopier
	Shortcuts *shortcut.Set
	// Check, in verify mode, filters the remembered nodes again and
	// reports a difference (kind "removal"); nil: no check.
	Check *shortcut.Checker
}

// RemovalGroup is one node group as scale-down sees it.
type RemovalGroup struct {
	Id   string
	Min  int
	Size int
	// Nodes are the group's registered nodes that may be removed: the
	// ready ones and those whose Ready condition is not true.
	Nodes []*corev1.Node
	// Thresholds, UnneededTime and UnreadyTime are the group's own (its
	// provider's per-group options); nil or zero: the planner's.
	Thresholds                *eligibility.Thresholds
	UnneededTime, UnreadyTime time.Duration
	// Whole: the group shrinks to zero at once or not at all
	// (zeroOrMaxNodeScaling): its nodes go together, all of them.
	Whole bool
	// Units names, for a group whose nodes come in units (issue 41), the
	// unit of each of its registered nodes (cloudprovider's UnitOf): the
	// nodes of one unit go together, all of them, or none. nil: no units.
	Units map[string]string
}

// unitMates are the nodes of node's unit, node included; nil without
// units.
func (g *RemovalGroup) unitMates(node string) []string {
	u, ok := g.Units[node]
	if !ok {
		return nil
	}
	var out []string
	for n, v := range g.Units {
		if v == u {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// RemovalInput is what one pass looks at. The runner's snapshot holds the
// cluster as built for this loop.
type RemovalInput struct {
	Groups []RemovalGroup
	// Pods are every pod of the cluster (budgets and gangs span nodes);
	// PodsByNode are the pods really bound to each node.
	Pods       []*corev1.Pod
	PodsByNode map[string][]*corev1.Pod
	PDBs       []*policyv1.PodDisruptionBudget
	PodGroups  []*schedulingv1beta1.PodGroup
	// CompositePodGroups bound the disruption of the PodGroups under
	// them (nil: not served).
	CompositePodGroups []*schedulingv1alpha3.CompositePodGroup
	// Destinations are the nodes pods may move to.
	Destinations []string
	// Deleting are nodes whose removal is under way; InFlightDrains are
	// those among them being drained. Both count against the limits.
	Deleting       map[string]bool
	InFlightDrains int
	// Owners tells whether pods' controllers exist (nil: not checked).
	Owners drainability.OwnerLookup
	// Policies are this pass's rules (its reservations count), after the
	// planner's own.
	Policies []NodePolicy
	Now      time.Time
}

// Removal is a node to remove now.
type Removal struct {
	Node  *corev1.Node
	Group string
	// Evict are the pods to evict first; none for an empty node.
	Evict []*corev1.Pod
	// Moves says where the simulation put each moving pod.
	Moves       map[string]string
	Utilization utilization.NodeUtilization
}

// Unremovable says why a node stays.
type Unremovable struct {
	Reason, Detail string
}

// Warning is bad input to report on the object it was found in.
type Warning struct {
	Object  runtime.Object
	Reason  string
	Message string
}

// RemovalPlan is the outcome of one pass.
type RemovalPlan struct {
	// Unneeded are the nodes that could go now, as far as the cluster is
	// concerned, whether or not long enough yet.
	Unneeded    []string
	Unremovable map[string]Unremovable
	// Empty are nodes without pods to move, removed together; Drain are
	// nodes drained first.
	Empty, Drain []Removal
	Warnings     []Warning
	Utilization  map[string]utilization.NodeUtilization

	// movesOf holds the simulated moves of the unneeded nodes; unitOf
	// the nodes that must go together with a node (a gang's), itself
	// included.
	movesOf map[string]map[string]string
	unitOf  map[string][]string
}

// MovesOf are the simulated moves ("namespace/name" to node) of an
// unneeded node's pods; nil for a node that is not unneeded.
func (p *RemovalPlan) MovesOf(node string) map[string]string { return p.movesOf[node] }

// record keeps what the simulation found for an unneeded node.
func (p *RemovalPlan) record(node string, moves map[string]string, unit []string) {
	if p.movesOf == nil {
		p.movesOf, p.unitOf = map[string]map[string]string{}, map[string][]string{}
	}
	p.movesOf[node] = moves
	p.unitOf[node] = unit
}

// RemovalPlanner holds what lives across passes: since when nodes are unneeded.
type RemovalPlanner struct {
	opts    Options
	runner  *framework.Runner
	tracker *unneeded.Ledger
	// devices keeps nodes' device use across passes.
	devices *utilization.Memo
}

// New returns a planner simulating with runner.
func New(runner *framework.Runner, opts Options) *RemovalPlanner {
	if opts.MaxDrainParallelism <= 0 {
		opts.MaxDrainParallelism = 1
	}
	return &RemovalPlanner{opts: opts, runner: runner, tracker: unneeded.New(), devices: utilization.NewMemo()}
}

// UnneededSince reports when a node became unneeded.
func (p *RemovalPlanner) UnneededSince(node string) (time.Time, bool) { return p.tracker.Since(node) }

// candidate is a node that passed the cheap checks.
type candidate struct {
	node  *corev1.Node
	group *RemovalGroup
	util  utilization.NodeUtilization
	// moving are the pods to re-place (the snapshot's, assumed ones
	// included); evict are those really bound to the node.
	moving, evict []*corev1.Pod
	ranks         ranks
	// cost is the disruption cost of the pods to evict (cost.go).
	cost        int64
	since       time.Time
	wasUnneeded bool
}

// RemovalPlan runs one pass. It changes nothing in the cluster; the snapshot is
// as before when it returns.
func (p *RemovalPlanner) Plan(ctx context.Context, in RemovalInput) (*RemovalPlan, error) {
	logger := klog.FromContext(ctx)
	plan := &RemovalPlan{Unremovable: map[string]Unremovable{}, Utilization: map[string]utilization.NodeUtilization{}}
	calc, err := utilization.FromSnapshot(p.runner.Snapshot())
	if err != nil {
		return nil, fmt.Errorf("scale-down: %w", err)
	}
	calc.Remember(p.devices)
	pdbs := drainability.NewPDBs(in.PDBs, in.Pods)
	for _, pr := range pdbs.Problems {
		plan.Warnings = append(plan.Warnings, Warning{Object: pr.PDB, Reason: pr.Reason, Message: pr.Message})
	}
	gangs := drainability.NewGangs(in.PodGroups, in.CompositePodGroups, in.Pods)

	// Every node's device use, counted side by side before the nodes
	// are screened one by one.
	var screened []string
	for _, g := range in.Groups {
		for _, n := range g.Nodes {
			if !in.Deleting[n.Name] {
				screened = append(screened, n.Name)
			}
		}
	}
	calc.NodesAhead(screened)
	var cands []*candidate
	for gi := range in.Groups {
		g := &in.Groups[gi]
		deleting := 0
		for _, n := range g.Nodes {
			if in.Deleting[n.Name] {
				deleting++
			}
		}
		for _, node := range g.Nodes {
			if c := p.screen(plan, pdbs, g, node, deleting, calc, in); c != nil {
				cands = append(cands, c)
			}
		}
	}
	p.order(cands)
	unneededNodes, err := p.simulate(ctx, plan, cands, pdbs, gangs, in)
	if err != nil {
		return nil, err
	}
	plan.Unneeded = unneededNodes
	p.tracker.Update(unneededNodes, in.Now)
	p.choose(plan, cands, gangs, in)
	// Every pass plans; only a plan that removes something is news.
	v := 3
	if len(plan.Empty)+len(plan.Drain) > 0 {
		v = 2
	}
	logger.V(v).Info("Scale-down plan", "unneeded", len(plan.Unneeded), "unremovable", len(plan.Unremovable),
		"empty", len(plan.Empty), "drain", len(plan.Drain))
	return plan, nil
}

// screen applies the per-node checks and the pod rules; it returns nil
// for a node that is unremovable (recorded in plan).
func (p *RemovalPlanner) screen(plan *RemovalPlan, pdbs *drainability.PDBs, g *RemovalGroup, node *corev1.Node, deleting int, calc *utilization.Calculator, in RemovalInput) *candidate {
	now := in.Now
	unremovable := func(reason, detail string) *candidate {
		plan.Unremovable[node.Name] = Unremovable{Reason: reason, Detail: detail}
		return nil
	}
	if in.Deleting[node.Name] {
		return unremovable(eligibility.CurrentlyBeingDeleted, "")
	}
	ni, err := p.runner.Snapshot().NodeInfos().Get(node.Name)
	if err != nil {
		return unremovable(UnexpectedError, fmt.Sprintf("not in the snapshot: %v", err))
	}
	util := calc.Node(ni)
	plan.Utilization[node.Name] = util
	thresholds := p.opts.Thresholds
	if g.Thresholds != nil {
		thresholds = *g.Thresholds
	}
	v := eligibility.Check(node, util, thresholds, p.opts.UnreadyEnabled)
	if v.Warning != "" {
		plan.Warnings = append(plan.Warnings, Warning{Object: node, Reason: "InvalidAnnotation", Message: v.Warning})
	}
	if !v.Eligible {
		return unremovable(v.Reason, v.Detail)
	}
	policies := append(p.opts.Policies[:len(p.opts.Policies):len(p.opts.Policies)], in.Policies...)
	if reason, k := keep(policies, node, now); k {
		return unremovable(reason, "kept by a scale-down policy")
	}
	if g.Size-deleting <= g.Min {
		return unremovable(NodeGroupMinSizeReached, fmt.Sprintf("node group %s has %d nodes, min %d", g.Id, g.Size-deleting, g.Min))
	}
	c := &candidate{node: node, group: g, util: util, ranks: rankOf(policies, node, now)}
	c.since, c.wasUnneeded = p.tracker.Since(node.Name)
	real := map[types.UID]*corev1.Pod{}
	for _, pod := range in.PodsByNode[node.Name] {
		real[pod.UID] = pod
	}
	rules := p.opts.Rules
	rules.Owners = in.Owners
	ready := eligibility.IsReady(node)
	// In name order: the snapshot holds a node's pods in the order the
	// informers listed them (a map's), and which pod is moved first
	// decides where each goes and which one is named when one cannot.
	podInfos := slices.SortedFunc(slices.Values(ni.GetPods()), func(a, b fwk.PodInfo) int {
		x, y := a.GetPod(), b.GetPod()
		return objorder.Compare(x.Namespace, x.Name, y.Namespace, y.Name)
	})
	for _, pi := range podInfos {
		pod := pi.GetPod()
		bound, isReal := real[pod.UID]
		delete(real, pod.UID)
		if !isReal {
			if pod.Status.NominatedNodeName == node.Name && pod.DeletionTimestamp == nil {
				// The scheduler is placing it here, and the devices it
				// will claim are not in the snapshot yet (its claims are
				// unallocated until it binds): moving it on paper could
				// remove a new node a gang is landing on.
				return unremovable(PodsNominated, fmt.Sprintf("pod %s/%s is nominated for it", pod.Namespace, pod.Name))
			}
			// Placed by this loop's simulation (a pending pod that fits
			// here): it needs room elsewhere, there is nothing to evict.
			c.moving = append(c.moving, pod)
			continue
		}
		out := rules.CheckOn(bound, pdbs.Covered(bound), ready)
		if out.Warning != "" {
			plan.Warnings = append(plan.Warnings, Warning{Object: bound, Reason: "InvalidAnnotation", Message: out.Warning})
		}
		switch out.Verdict {
		case drainability.Blocks:
			return unremovable(out.Reason, out.Detail)
		case drainability.Moves:
			c.moving = append(c.moving, pod)
			c.evict = append(c.evict, bound)
		}
	}
	// Pods the snapshot leaves out (expendable ones, below the priority
	// cutoff) need no room elsewhere, but they are still evicted with the
	// node, under the same rules.
	left := make([]*corev1.Pod, 0, len(real))
	for _, bound := range real {
		if bound.Status.Phase != corev1.PodSucceeded && bound.Status.Phase != corev1.PodFailed {
			left = append(left, bound)
		}
	}
	sort.Slice(left, func(i, j int) bool {
		return objorder.Compare(left[i].Namespace, left[i].Name, left[j].Namespace, left[j].Name) < 0
	})
	for _, bound := range left {
		out := rules.CheckOn(bound, pdbs.Covered(bound), ready)
		switch out.Verdict {
		case drainability.Blocks:
			return unremovable(out.Reason, out.Detail)
		case drainability.Moves:
			c.evict = append(c.evict, bound)
		}
	}
	cost, warnings := disruptionCost(c.evict)
	c.cost = cost
	plan.Warnings = append(plan.Warnings, warnings...)
	return c
}

// order puts the candidates in the order their removal is tried: nodes
// already unneeded first (longest first, so the unneeded clock keeps
// running for them), then by policy rank, utilization, the disruption
// cost of their pods and name.
func (p *RemovalPlanner) order(cands []*candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.wasUnneeded != b.wasUnneeded {
			return a.wasUnneeded
		}
		if a.wasUnneeded && !a.since.Equal(b.since) {
			return a.since.Before(b.since)
		}
		if c := a.ranks.compare(b.ranks); c != 0 {
			return c < 0
		}
		if a.util.Utilization != b.util.Utilization {
			return a.util.Utilization < b.util.Utilization
		}
		if a.cost != b.cost {
			return a.cost < b.cost
		}
		return a.node.Name < b.node.Name
	})
}
