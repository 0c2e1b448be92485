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
	// Message is what it lacked, or its score (the pod group cycle).
	Message string
}

// PlanGangs plans each gang as one unit, highest priority first: capacity
// for at least minCount members (counting those already bound) in existing
// or coming nodes plus new nodes of one or more groups — or nothing at all.
// The scheduler's own pod group cycle plans every gang it can run
// (gangcycle.go): its plugins choose the topology domain at every level.
// A gang whose PodGroup the simulation lacks (GenericWorkload off; a
// ProvisioningRequest's pods when their simulated group cannot be set) is
// planned whole without the cycle, and only when it has no topology
// constraint: the autoscaler does not choose a domain the scheduler did
// not. What a gang gets is kept in the runner's snapshot, so later gangs
// and pods see it as taken, and added to usage, which is returned.
func (p *Planner) PlanGangs(ctx context.Context, runner *framework.Runner, gangs []*gang.Gang, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time) ([]GangOutcome, limits.Usage, error) {
	var out []GangOutcome
	st := newGangStage(p.gangNodeKeys(runner, gangs))
	for _, g := range gangs {
		o, ran, err := p.planGangCycle(ctx, runner, g, candidates, groups, usage, now, st)
		if err != nil {
			return nil, usage, fmt.Errorf("gang %s: pod group cycle: %w", g.Key(), err)
		}
		if !ran {
			if o, err = p.planGangWhole(ctx, runner, g, candidates, groups, usage, now); err != nil {
				return nil, usage, fmt.Errorf("gang %s: %w", g.Key(), err)
			}
		}
		p.gangToMax(&o, usage)
		for _, up := range o.ScaleUps {
			usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
		}
		klog.FromContext(ctx).V(2).Info("Gang planned", "gang", g.Key(), "minCount", g.MinCount, "bound", g.Bound, "pending", len(g.Pending),
			"fitsExisting", o.FitsExisting, "scaleUps", len(o.ScaleUps), "domain", o.Domain, "why", o.Message, "cycle", ran)
		out = append(out, o)
	}
	return out, usage, nil
}

// planGangWhole plans a gang the pod group cycle cannot run: all of its
// members or none, without topology. It is planned in a fork, kept when
// it fits and dropped otherwise, so a gang that does not fit leaves
// nothing behind.
func (p *Planner) planGangWhole(ctx context.Context, runner *framework.Runner, g *gang.Gang, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time) (GangOutcome, error) {
	if g.TopologyKey != "" {
		return GangOutcome{Gang: g, Message: fmt.Sprintf("gang %s has the topology constraint %s, and the scheduler's pod group cycle cannot run for it "+
			"(its PodGroup is not in the simulation: GenericWorkload and TopologyAwareWorkloadScheduling must be in --feature-gates as the scheduler has them); "+
			"no domain is chosen for it", g.Key(), g.TopologyKey)}, nil
	}
	var o GangOutcome
	err := p.keptIf(runner, func() (bool, error) {
		var err error
		o, err = p.planGangIn(ctx, runner, g, candidates, groups, usage, now)
		return o.feasible(), err
	})
	o.Tried = []DomainTry{{Feasible: o.feasible(), Message: o.Message}}
	return o, err
}

func (o *GangOutcome) feasible() bool { return o.FitsExisting || len(o.ScaleUps) > 0 }

// planGangIn plans the gang's members whole, without topology, and leaves
// its placements in the snapshot; the caller forks around it.
func (p *Planner) planGangIn(ctx context.Context, runner *framework.Runner, g *gang.Gang, candidates []string,
	groups []*nodegroups.Info, usage limits.Usage, now time.Time) (GangOutcome, error) {
	o := GangOutcome{Gang: g}
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
		if len(opt.Pods) >= need {
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
