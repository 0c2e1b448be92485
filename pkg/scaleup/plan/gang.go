package plan

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// ReasonGangDoesNotFit is why a gang gets no capacity at all.
const ReasonGangDoesNotFit = "gang-does-not-fit"

// GangOutcome is what the planner decided for one gang.
type GangOutcome struct {
	Gang *gang.Gang
	// FitsExisting: enough members fit capacity that exists or is coming.
	FitsExisting bool
	// ScaleUps are the parts of the gang's scale-up (one per node group,
	// each atomic); all of them or none must succeed.
	ScaleUps []act.ScaleUp
	// Domain is the topology value the gang was planned into, if any.
	Domain string
	// Existing are the members the plan placed on nodes that exist or
	// are coming, by node name.
	Existing map[*corev1.Pod]string
	// Message says why nothing was planned, when ScaleUps is empty and the
	// gang does not fit existing capacity.
	Message string
	// Reasons are, per node group, why it could not host the gang.
	Reasons []GroupReason
	// Tried are the topology domains tried for the gang (one, named "",
	// without a topology key), in the order tried: what each could do or
	// lacked. Explain shows them.
	Tried []DomainTry
}

// DomainTry is one topology domain tried for a gang.
type DomainTry struct {
	Domain string
	// Feasible: the gang fits there whole (existing room and new nodes).
	Feasible bool
	// NewNodes is how many new nodes it would take (the domain loop).
	NewNodes int
	// Message is what it lacked, or its score (the pod group cycle).
	Message string
}

// PlanGangs plans each gang as one unit, highest priority first: capacity
// for at least minCount members (counting those already bound) in existing
// or coming nodes plus new nodes of one or more groups — or nothing at all.
// A gang with a topology key is planned inside one domain, as the
// scheduler's group cycle places it: one candidate placement per value of
// the key, the one needing fewest new nodes wins. With Options.GangCycle
// the scheduler's own cycle plans a gang whose PodGroup is in the snapshot
// instead (gangcycle.go). What a gang gets is kept
// in the runner's snapshot, so later gangs and pods see it as taken, and
// added to usage, which is returned.
func (p *Planner) PlanGangs(ctx context.Context, runner *framework.Runner, gangs []*gang.Gang, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time) ([]GangOutcome, limits.Usage, error) {
	var out []GangOutcome
	snap := runner.Snapshot()
	keys := p.gangNodeKeys(runner, gangs)
	for _, g := range gangs {
		// A CompositePodGroup tree has no plan but the cycle's: the loop
		// below knows one level only.
		if p.opts.GangCycle || g.Composite {
			o, ran, err := p.planGangCycle(ctx, runner, g, candidates, groups, usage, now, keys)
			if err != nil {
				return nil, usage, fmt.Errorf("gang %s: pod group cycle: %w", g.Key(), err)
			}
			if ran {
				p.gangToMax(&o, usage)
				for _, up := range o.ScaleUps {
					usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
				}
				klog.FromContext(ctx).V(2).Info("Gang planned", "gang", g.Key(), "minCount", g.MinCount, "bound", g.Bound, "pending", len(g.Pending),
					"fitsExisting", o.FitsExisting, "scaleUps", len(o.ScaleUps), "domain", o.Domain, "why", o.Message, "cycle", true)
				out = append(out, o)
				continue
			}
		}
		// Try every domain without keeping anything, then plan the one
		// needing fewest new nodes again and keep it.
		domains := []string{""}
		if g.TopologyKey != "" {
			domains = topologyDomains(runner, g.TopologyKey, candidates, groups)
		}
		var best, first *GangOutcome
		var ties []GangOutcome // feasible, as few new nodes as best
		var tried []DomainTry
		for _, d := range domains {
			snap.Fork()
			restore := p.markCapacity()
			o, err := p.planGangIn(ctx, runner, g, d, candidates, groups, usage, now)
			restore()
			if rerr := snap.Revert(); err == nil {
				err = rerr
			}
			if err != nil {
				return nil, usage, fmt.Errorf("gang %s: %w", g.Key(), err)
			}
			tried = append(tried, DomainTry{Domain: d, Feasible: o.feasible(), NewNodes: o.newNodes(), Message: o.Message})
			switch {
			case o.feasible() && (best == nil || o.newNodes() < best.newNodes()):
				best = &o
				ties = []GangOutcome{o}
			case o.feasible() && o.newNodes() == best.newNodes():
				ties = append(ties, o)
			case !o.feasible() && first == nil:
				first = &o
			}
		}
		if len(ties) > 1 {
			best = p.preferredOutcome(ties, now)
		}
		switch {
		case best != nil:
			o, err := p.planGangIn(ctx, runner, g, best.Domain, candidates, groups, usage, now)
			if err != nil {
				return nil, usage, fmt.Errorf("gang %s: %w", g.Key(), err)
			}
			best = &o
			p.gangToMax(best, usage)
			for _, up := range best.ScaleUps {
				usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
			}
		case first != nil:
			best = first
			if g.TopologyKey != "" {
				best.Message = fmt.Sprintf("no %s domain can host the gang (%d tried); first: %s", g.TopologyKey, len(domains), first.Message)
			}
		default:
			best = &GangOutcome{Gang: g, Message: fmt.Sprintf("no node or node group has the topology label %s", g.TopologyKey)}
		}
		best.Tried = tried
		klog.FromContext(ctx).V(2).Info("Gang planned", "gang", g.Key(), "minCount", g.MinCount, "bound", g.Bound,
			"pending", len(g.Pending), "fitsExisting", best.FitsExisting, "scaleUps", len(best.ScaleUps), "domain", best.Domain, "why", best.Message)
		out = append(out, *best)
	}
	return out, usage, nil
}

// preferredOutcome is, of domains needing as many new nodes, the one
// whose first scale-up the expander chain prefers (a reservation's nodes
// before on-demand ones, the cheaper group): which of them to buy is the
// autoscaler's choice, as in the pod group cycle (preferred). The first
// when none buys anything.
func (p *Planner) preferredOutcome(ties []GangOutcome, now time.Time) *GangOutcome {
	var options []expander.Option
	var of []int
	for i, o := range ties {
		if len(o.ScaleUps) == 0 {
			continue
		}
		up := o.ScaleUps[0]
		options, of = append(options, p.option(up.Group, up.Delta, up.Pods, now)), append(of, i)
	}
	best := p.chain.Choose(options)
	if best == nil {
		return &ties[0]
	}
	for k := range options {
		if options[k].NodeGroup == best.NodeGroup {
			return &ties[of[k]]
		}
	}
	return &ties[0]
}

func (o *GangOutcome) feasible() bool { return o.FitsExisting || len(o.ScaleUps) > 0 }

func (o *GangOutcome) newNodes() int {
	n := 0
	for _, up := range o.ScaleUps {
		n += up.Delta
	}
	return n
}

// planGangIn plans the gang in one domain ("" for no topology) and leaves
// its placements in the snapshot; the caller forks around it.
func (p *Planner) planGangIn(ctx context.Context, runner *framework.Runner, g *gang.Gang, domain string, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time) (GangOutcome, error) {
	o := GangOutcome{Gang: g, Domain: domain}
	if domain != "" {
		candidates = nodesIn(runner, g.TopologyKey, domain, candidates)
		groups = groupsIn(g.TopologyKey, domain, groups)
	}
	var rest []*corev1.Pod
	fit := 0
	for _, pod := range g.Pending {
		pl, err := runner.SchedulePod(ctx, pod, candidates)
		if err != nil {
			return o, err
		}
		if pl.Node != "" {
			fit++
			if o.Existing == nil {
				o.Existing = map[*corev1.Pod]string{}
			}
			o.Existing[pod] = pl.Node
		} else {
			rest = append(rest, pod)
		}
	}
	need := g.Need() - fit
	if need <= 0 {
		o.FitsExisting = true
		return o, nil
	}
	log := &reasonLog{}
	options, err := p.options(ctx, groups, nil, rest, usage, now, log, nil)
	if err != nil {
		return o, err
	}
	var whole []expander.Option
	for _, opt := range options {
		if len(opt.Pods) >= need && !overUnit(groupByID(groups, opt.NodeGroup), domain, opt.NodeCount) {
			whole = append(whole, opt)
		}
	}
	if best := p.chain.Choose(whole); best != nil {
		up, _, err := p.keep(ctx, best.Pods, groupByID(groups, best.NodeGroup), best.NodeCount, g)
		if err != nil {
			return o, err
		}
		p.take(up.Group, up.Delta, up.Pods)
		o.ScaleUps = []act.ScaleUp{up}
		return o, nil
	}
	// No single group takes the gang: fill several, biggest first, and
	// keep the lot only if together they reach minCount.
	sort.SliceStable(options, func(i, j int) bool { return len(options[i].Pods) > len(options[j].Pods) })
	placed := 0
	undo := p.markCapacity()
	for _, opt := range options {
		if placed >= need || len(rest) == 0 {
			break
		}
		// Groups sharing a reservation: what earlier parts took is gone.
		maxNodes := p.reservedRoom(groupByID(groups, opt.NodeGroup), rest, opt.NodeCount)
		if unit, _ := groupByID(groups, opt.NodeGroup).Template.UnitSize(); unit > 1 && domain == newDomain(opt.NodeGroup) {
			maxNodes = min(maxNodes, unit)
		}
		if maxNodes == 0 {
			continue
		}
		up, n, err := p.keep(ctx, rest, groupByID(groups, opt.NodeGroup), maxNodes, g)
		if err != nil {
			return o, err
		}
		if n == 0 {
			continue
		}
		placed += n
		p.take(up.Group, up.Delta, up.Pods)
		rest = without(rest, up.Pods)
		usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
		o.ScaleUps = append(o.ScaleUps, up)
	}
	if placed >= need {
		return o, nil
	}
	undo()
	o.ScaleUps = nil
	o.Message = fmt.Sprintf("gang %s needs %d more member(s) placed to reach minCount %d; existing capacity takes %d and new nodes at most %d",
		g.Key(), g.Need(), g.MinCount, fit, placed)
	if domain != "" {
		o.Message += fmt.Sprintf(" in %s=%s", g.TopologyKey, domain)
	}
	for _, opt := range options {
		if grp := groupByID(groups, opt.NodeGroup); overUnit(grp, domain, opt.NodeCount) {
			unit, _ := grp.Template.UnitSize()
			o.Message += "; " + unitNote(runner, grp, unit, g.TopologyKey, opt.NodeCount)
		}
	}
	reasons := p.resolve(ctx, []*reasonLog{log}, g.Pending)
	for _, pod := range g.Pending {
		o.Reasons = append(o.Reasons, reasons[pod.UID]...)
	}
	o.Reasons = dedupe(o.Reasons)
	return o, nil
}

// keep estimates pods on group g with room for at most maxNodes new nodes
// and keeps the result in the snapshot; it returns the atomic scale-up
// and how many pods it placed.
func (p *Planner) keep(ctx context.Context, pods []*corev1.Pod, g *nodegroups.Info, maxNodes int, gg *gang.Gang) (act.ScaleUp, int, error) {
	est := p.estimate.WithLimits(estimator.Options{MaxNodes: maxNodes, MaxDuration: p.opts.MaxBinpacking})
	res, err := est.EstimateAndKeep(ctx, pods, g.Template, g.Id)
	if err != nil {
		return act.ScaleUp{}, 0, err
	}
	up := act.ScaleUp{Group: g, Delta: res.NodeCount, Atomic: true, Gang: gg.Key(), Nodes: byNode(res, res.NodeCount)}
	for _, pl := range res.Placements {
		up.Pods = append(up.Pods, pl.Pod)
	}
	return toUnits(up), len(res.Placements), nil
}

// topologyDomains are the values of key on candidate nodes and group
// templates, sorted, then one new domain per group whose provider picks
// the value per request (newDomain): one atomic request of it is a domain
// of its own, which no node has yet.
func topologyDomains(runner *framework.Runner, key string, candidates []string, groups []*nodegroups.Info) []string {
	seen := map[string]bool{}
	for _, name := range candidates {
		if ni, err := runner.Snapshot().NodeInfos().Get(name); err == nil {
			if v, ok := ni.Node().Labels[key]; ok {
				seen[v] = true
			}
		}
	}
	for _, g := range groups {
		if g.Template != nil {
			if v, ok := g.Template.Node.Labels[key]; ok {
				seen[v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	for _, g := range groups {
		if g.Template.TopologyPerRequest(key) {
			out = append(out, newDomain(g.Id))
		}
	}
	return out
}

// newDomain names the domain one new request of group id makes: no label
// value can be spelt so (a value has no spaces).
func newDomain(id string) string { return "new request of " + id }

// overUnit says whether n new nodes of g in domain would span more than
// one of g's units while domain is one new request of g: a unit is one
// domain, two units two.
func overUnit(g *nodegroups.Info, domain string, n int) bool {
	unit, _ := g.Template.UnitSize()
	return unit > 1 && domain == newDomain(g.Id) && n > unit
}

func nodesIn(runner *framework.Runner, key, value string, candidates []string) []string {
	var out []string
	for _, name := range candidates {
		if ni, err := runner.Snapshot().NodeInfos().Get(name); err == nil && ni.Node().Labels[key] == value {
			out = append(out, name)
		}
	}
	return out
}

func groupsIn(key, value string, groups []*nodegroups.Info) []*nodegroups.Info {
	var out []*nodegroups.Info
	for _, g := range groups {
		if g.Template != nil && (g.Template.Node.Labels[key] == value || value == newDomain(g.Id) && g.Template.TopologyPerRequest(key)) {
			out = append(out, g)
		}
	}
	return out
}

func dedupe(rs []GroupReason) []GroupReason {
	seen := map[GroupReason]bool{}
	var out []GroupReason
	for _, r := range rs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// gangToMax widens the gang's parts in groups that scale to their max
// size at once (toMax), booking the extra nodes.
func (p *Planner) gangToMax(o *GangOutcome, usage limits.Usage) {
	planned := map[string]int{}
	for i, up := range o.ScaleUps {
		id := up.Group.Id
		full := toMax(up, usage.Planned[id]+planned[id])
		if extra := full.Delta - up.Delta; extra > 0 {
			p.take(up.Group, extra, nil)
		}
		o.ScaleUps[i] = full
		planned[id] += full.Delta
	}
}
