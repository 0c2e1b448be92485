// Package plan decides the scale-ups of one loop. For the pods nothing
// existing can take, it estimates each node group (the real scheduler
// framework on hypothetical nodes from the group's template), caps each
// option by the group's size, the cluster-wide limits and the per-scale-up
// maximum, lets the expander chain pick the best, and repeats with the pods
// still left, so pods needing different hardware get different groups in
// one loop. For every pod left without a group it keeps, per group, why.
package plan

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
)

// Reasons a group could not help, beside scheduler plugins.
const (
	ReasonBackoff       = "backoff"
	ReasonNoTemplate    = "no-template"
	ReasonFromZero      = "scale-up-from-zero-disabled"
	ReasonEstimateLimit = "estimate-limit"
	// ReasonZeroOrMax: the group scales to its max at once
	// (zeroOrMaxNodeScaling) and the limits do not allow that many.
	ReasonZeroOrMax = "zero-or-max-node-scaling"
	// ReasonUnitSize: the group grows in units (the template's UnitSize)
	// and the limits allow less than one.
	ReasonUnitSize = "unit-size"
)

// Options configure the planner.
type Options struct {
	MaxNodesPerScaleUp int
	ScaleUpFromZero    bool
	MaxBinpacking      time.Duration
	// Balance, when set, spreads each scale-up over the groups similar
	// to the chosen one (--balance-similar-node-groups).
	Balance *balance.Similarity
}

// Planner plans scale-ups.
type Planner struct {
	opts     Options
	chain    expander.Chain
	limiter  *limits.Limiter
	backoff  *backoff.Backoff
	pricing  cloudprovider.PricingModel // nil: no prices
	estimate *estimator.Estimator
	diagnose *estimator.Diagnoser
	capacity Capacity // nil: no reservations
	// noCarry re-estimates every group every round (reuse.go), for tests.
	noCarry bool
	// replayed counts the gangs planned as an alike gang before them
	// (gangReplay), and reusedOptions those whose options were an alike
	// gang's, for tests.
	replayed, reusedOptions int
}

// New returns a planner.
func New(opts Options, est *estimator.Estimator, chain expander.Chain, limiter *limits.Limiter, b *backoff.Backoff, pricing cloudprovider.PricingModel) *Planner {
	if opts.MaxBinpacking > 0 {
		est = est.WithLimits(estimator.Options{MaxDuration: opts.MaxBinpacking})
	}
	return &Planner{opts: opts, chain: chain, limiter: limiter, backoff: b, pricing: pricing, estimate: est, diagnose: est.Diagnoser()}
}

// Plan is the outcome: the scale-ups to make and why the other pods get none.
type Plan struct {
	ScaleUps  []act.ScaleUp
	NotHelped []*corev1.Pod
	Reasons   map[types.UID][]GroupReason
}

// Plan decides the scale-ups for pods. usage is what the cluster has and
// has asked for; it grows with each decision so limits hold across them.
func (p *Planner) Plan(ctx context.Context, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage, now time.Time) (*Plan, error) {
	plan, _, err := p.plan(ctx, pods, groups, usage, now)
	return plan, err
}

// plan is Plan, also returning what it carried (reuse.go).
func (p *Planner) plan(ctx context.Context, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage, now time.Time) (*Plan, *carry, error) {
	logger := klog.FromContext(ctx)
	plan := &Plan{Reasons: map[types.UID][]GroupReason{}}
	remaining := pods
	used := map[string]bool{}
	// Reasons are kept across rounds: a group chosen in an earlier round is
	// not estimated again, yet why it left pods out (its room ran out)
	// still holds. A later round's reason for a group replaces an earlier
	// one. They are made only for the pods no group helps, at the end.
	var rounds []*reasonLog
	carry := newCarry(p.noCarry, pods, p.estimate.Independent)
	for len(remaining) > 0 {
		round := &reasonLog{}
		options, err := p.options(ctx, groups, used, remaining, usage, now, round, carry)
		if err != nil {
			return nil, nil, err
		}
		supersede(rounds, round)
		rounds = append(rounds, round)
		best := p.chain.Choose(options)
		if best == nil {
			plan.NotHelped = remaining
			for uid, rs := range p.resolve(ctx, rounds, remaining) {
				if len(rs) > 0 {
					plan.Reasons[uid] = rs
				}
			}
			break
		}
		g := groupByID(groups, best.NodeGroup)
		// Keep the chosen nodes in the snapshot: later rounds (and the
		// explanation of what is left) see them as taken. The option's
		// estimate, made on this snapshot or carried to it, lends the
		// keep what it learnt.
		mark := p.estimate.Mark()
		kept, err := p.estimate.EstimateAndKeepFrom(ctx, carry.estimateOf(g.Id), best.Pods, g.Template, g.Id)
		if err != nil {
			return nil, nil, err
		}
		carry.keepCalls += kept.FrameworkCalls
		carry.kept(best.Pods, p.estimate.KeptLocal(mark, kept, g.Template))
		// With balancing, the nodes are spread over g and the groups
		// similar to it (balance.go).
		ups := p.spread(g, best, options, groups, byNode(kept, best.NodeCount), usage.Planned)
		if g.Options.ZeroOrMaxNodeScaling {
			ups = []act.ScaleUp{toMax(act.ScaleUp{Group: g, Delta: best.NodeCount, Pods: best.Pods, Nodes: byNode(kept, best.NodeCount)}, usage.Planned[g.Id])}
		}
		for i := range ups {
			ups[i] = toUnits(ups[i])
		}
		for _, up := range ups {
			used[up.Group.Id] = true
			p.take(up.Group, up.Delta, up.Pods)
			usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
			plan.ScaleUps = append(plan.ScaleUps, up)
		}
		logger.V(2).Info("Scale-up option chosen", "nodeGroup", g.Id, "nodes", best.NodeCount, "pods", len(best.Pods), "options", len(options), "expanders", p.chain.Names())
		remaining = without(remaining, best.Pods)
	}
	return plan, carry, nil
}

// candidate is a group that may grow, with the room it has.
type candidate struct {
	info   *nodegroups.Info
	room   int
	reason string // the limit that sets room
	// pods, when set, are the only pods the group may serve (its
	// reservations cannot serve the others).
	pods []*corev1.Pod
}

// options estimates every group that may grow, in one pass over the pods
// (the estimator shares the per-pod work across groups), and records for
// every pod why each other group cannot help it. With c, estimates of the
// last round that still hold are carried instead (reuse.go).
func (p *Planner) options(ctx context.Context, groups []*nodegroups.Info, used map[string]bool, pods []*corev1.Pod,
	usage limits.Usage, now time.Time, reasons *reasonLog, c *carry) ([]expander.Option, error) {
	var cands []candidate
	var est []estimator.TemplateGroup
	for _, g := range groups {
		if used[g.Id] {
			continue
		}
		c, reason, msg := p.gate(g, usage, now)
		if c == nil {
			reasons.all(pods, GroupReason{Group: g.Id, Reason: reason, Message: msg})
			continue
		}
		if !p.reserve(c, pods, reasons) {
			continue
		}
		cands = append(cands, *c)
		est = append(est, estimator.TemplateGroup{Name: g.Id, Template: g.Template, MaxNodes: c.room})
	}
	if len(cands) == 0 {
		c.put(pods, nil, nil)
		return nil, nil
	}
	results, err := p.estimateCandidates(ctx, pods, cands, est, c)
	if err != nil {
		return nil, err
	}
	c.put(pods, cands, results)
	var options []expander.Option
	for i, res := range results {
		c := cands[i]
		reasons.left(c, res.Unplaced)
		if res.NodeCount == 0 || len(res.Placements) == 0 {
			continue
		}
		pods := make([]*corev1.Pod, 0, len(res.Placements))
		for _, pl := range res.Placements {
			pods = append(pods, pl.Pod)
		}
		opt := p.option(c.info, res.NodeCount, pods, now)
		opt.DevicesUsed = res.DevicesUsed
		options = append(options, opt)
	}
	return options, nil
}

// option is n new nodes of g for pods, priced and described as the
// expanders see it.
func (p *Planner) option(g *nodegroups.Info, n int, pods []*corev1.Pod, now time.Time) expander.Option {
	opt := expander.Option{NodeGroup: g.Id, NodeCount: n, Template: g.Template, Price: -1, Pods: pods}
	if p.pricing != nil {
		if price, err := p.pricing.NodePrice(g.Template.Node, now, now.Add(time.Hour)); err == nil {
			opt.Price = price * float64(n)
		}
	}
	p.describe(&opt, g)
	return opt
}

// gate says whether a group may grow now and by how much; when it may not,
// it says why.
func (p *Planner) gate(g *nodegroups.Info, usage limits.Usage, now time.Time) (*candidate, string, string) {
	if g.Template == nil {
		return nil, ReasonNoTemplate, fmt.Sprint(g.TemplateErr)
	}
	if st, off := p.backoff.Get(g.Id, now); off {
		return nil, ReasonBackoff, fmt.Sprintf("backed off until %s after %s", st.Until.Format(time.RFC3339), st.Reason)
	}
	if g.Size() == 0 && !p.opts.ScaleUpFromZero {
		return nil, ReasonFromZero, ""
	}
	// Nodes planned earlier in the pass (requests, gangs, other rounds)
	// are the group's as much as those it has.
	planned := usage.Planned[g.Id]
	room, reason := g.Max-g.Size()-planned, limits.ReasonGroupMax
	if capped, r := p.limiter.MaxNewNodes(usage, g.Template.Node, room); capped < room {
		room, reason = capped, r
	}
	if p.opts.MaxNodesPerScaleUp > 0 && p.opts.MaxNodesPerScaleUp < room {
		room, reason = p.opts.MaxNodesPerScaleUp, "max-nodes-per-scaleup"
	}
	if n, _ := g.Template.UnitSize(); n > 1 && room > 0 && room%n != 0 {
		// Scale-ups come in whole units (toUnits): what is less than one
		// is no room.
		if room = room / n * n; room == 0 {
			return nil, ReasonUnitSize, fmt.Sprintf("the group grows in units of %d nodes; %s allows fewer", n, reason)
		}
	}
	if room <= 0 {
		if planned > 0 {
			return nil, reason, fmt.Sprintf("node group at %d of max %d with %d more planned in this pass", g.Size(), g.Max, planned)
		}
		return nil, reason, fmt.Sprintf("node group at %d of max %d", g.Size(), g.Max)
	}
	if rest := g.Max - g.Size() - planned; g.Options.ZeroOrMaxNodeScaling && room < rest {
		return nil, ReasonZeroOrMax, fmt.Sprintf("the group scales to its max size at once (%d more nodes); %s allows %d", rest, reason, room)
	}
	return &candidate{info: g, room: room, reason: reason}, "", ""
}

// blame names the claim constraints that keep pod off g's template node,
// "" when none alone does. A failed diagnosis is logged, not fatal: the
// plugin's own message still stands.
func (p *Planner) blame(ctx context.Context, pod *corev1.Pod, g *nodegroups.Info) string {
	if p.diagnose == nil {
		return ""
	}
	blames, err := p.diagnose.Diagnose(ctx, pod, g.Id, g.Template)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Diagnosing a DynamicResources rejection", "pod", klog.KObj(pod), "nodeGroup", g.Id)
		return ""
	}
	parts := make([]string, len(blames))
	for i, b := range blames {
		parts[i] = b.String()
	}
	return strings.Join(parts, " or ")
}

// byNode groups an estimate's placements by new node, in the order the
// estimate opened the nodes: what nominations later tell the scheduler.
// Nil when the estimate is not the option's (nodes differ in number).
func byNode(res *estimator.Estimate, nodes int) [][]*corev1.Pod {
	if res == nil || len(res.NewNodes) != nodes {
		return nil
	}
	index := make(map[string]int, len(res.NewNodes))
	for i, n := range res.NewNodes {
		index[n] = i
	}
	out := make([][]*corev1.Pod, len(res.NewNodes))
	for _, pl := range res.Placements {
		if i, ok := index[pl.Node]; ok {
			out[i] = append(out[i], pl.Pod)
		}
	}
	return out
}

func groupByID(groups []*nodegroups.Info, id string) *nodegroups.Info {
	for _, g := range groups {
		if g.Id == id {
			return g
		}
	}
	return nil
}

func without(pods, drop []*corev1.Pod) []*corev1.Pod {
	gone := make(map[types.UID]bool, len(drop))
	for _, p := range drop {
		gone[p.UID] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if !gone[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// GroupReason is why one node group could not help a pod: the planner's
// finding, which events, the status and explain tell.
type GroupReason struct {
	Group string
	// Reason is a limit ("max-nodes-total", "backoff", ...) or the
	// scheduler plugin that rejected the pod on the template node.
	Reason  string
	Message string
	// Constraint names the claim constraint to blame for a DynamicResources
	// rejection ("matchAttribute <attribute> of claim <name>"), if one is.
	Constraint string
}

func (g GroupReason) String() string {
	s := g.Group + ": " + g.Reason
	if g.Message != "" {
		s += ": " + g.Message
	}
	if g.Constraint != "" {
		s += " (fits without " + g.Constraint + ")"
	}
	return s
}

// toUnits is up for a group whose nodes come in units (the template's
// UnitSize): whole units in one all-or-nothing request, the nodes the
// plan placed pods on first, the rest of the last unit empty (room for
// other work once it runs). gate rounded the group's room down to whole
// units, so the padded request stays within it.
func toUnits(up act.ScaleUp) act.ScaleUp {
	if n, _ := up.Group.Template.UnitSize(); n <= 1 {
		return up
	}
	whole := up.Group.Template.Units(up.Delta)
	if up.Nodes != nil {
		up.Nodes = append(up.Nodes, make([][]*corev1.Pod, whole-up.Delta)...)
	}
	up.Delta, up.Atomic = whole, true
	return up
}

// toMax is up for a group that scales to its max size at once
// (zeroOrMaxNodeScaling, checked against the limits by gate): every node
// the group has room for, in one all-or-nothing request; the nodes the
// plan placed pods on come first, the rest start empty.
func toMax(up act.ScaleUp, planned int) act.ScaleUp {
	g := up.Group
	rest := g.Max - g.Size() - planned
	if !g.Options.ZeroOrMaxNodeScaling || rest <= up.Delta {
		return up
	}
	if up.Nodes != nil {
		up.Nodes = append(up.Nodes, make([][]*corev1.Pod, rest-up.Delta)...)
	}
	up.Delta, up.Atomic = rest, true
	return up
}
