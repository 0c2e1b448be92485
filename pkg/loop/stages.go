package loop

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/health"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
)

// Stage names, in pass order.
const (
	StageRefresh = "refresh"
	StageObserve = "observe"
	// StageVet tells the owners of input the pass cannot use (vet).
	StageVet          = "vet"
	StageGroups       = "nodeGroups"
	StageTrack        = "track"
	StageSnapshot     = "snapshot"
	StageReservations = "reservations"
	// StageReservationUpkeep reports on the reservations and drains the
	// nodes of ending capacity blocks.
	StageReservationUpkeep = "reservationUpkeep"
	StagePending           = "pending"
	StageSharing           = "sharing"
	StageProvReqs          = "provisioningRequests"
	StageGangs             = "gangs"
	StageFitExisting       = "fitExisting"
	StagePlan              = "plan"
	// StageBuffers plans the CapacityBuffers' pods after the real ones;
	// StageBufferStatus writes the buffers' status after act.
	StageBuffers      = "capacityBuffers"
	StageAct          = "act"
	StageBufferStatus = "capacityBufferStatus"
	StageScaleDown    = "scaleDown"
	StageReport       = "report"
	StageDisagree     = "disagreements"
	StageStatus       = "status"
	// StageNodeGroupObjects writes the NodeGroup objects.
	StageNodeGroupObjects = "nodeGroupObjects"
)

// Stages is the pass: every stage in order, the optional ones only when
// their part is there, and the registered extensions where they asked to
// be. The loop and explain run this one list (explain without the stages
// that act), so they cannot decide differently. A new built-in stage is a
// Stage and one line here; a feature outside the loop registers an
// Extension instead.
func (l *Loop) Stages() ([]Stage, error) {
	out := []Stage{
		stage{name: StageRefresh, run: l.refresh},
		stage{name: StageObserve, run: l.observe},
	}
	if l.Vet != nil {
		out = append(out, stage{name: StageVet, acts: true, run: l.vet})
	}
	out = append(out,
		stage{name: StageGroups, run: l.collectGroups},
		stage{name: StageTrack, acts: true, run: l.track},
		stage{name: StageSnapshot, run: l.buildSnapshot},
		stage{name: StageReservations, run: l.countReservations},
	)
	if l.Upkeep != nil {
		out = append(out, stage{name: StageReservationUpkeep, acts: true, run: l.reservationUpkeep})
	}
	out = append(out,
		stage{name: StagePending, run: l.pending},
		stage{name: StageSharing, run: l.sharing},
	)
	if l.ProvReqs != nil {
		out = append(out, stage{name: StageProvReqs, acts: true, run: l.provisioningRequests})
	}
	out = append(out,
		stage{name: StageGangs, run: l.planGangs},
		stage{name: StageFitExisting, run: l.fitExisting},
		stage{name: StagePlan, run: l.plan},
	)
	if l.Buffers != nil {
		out = append(out, stage{name: StageBuffers, run: l.capacityBuffers})
	}
	out = append(out, stage{name: StageAct, acts: true, run: l.act})
	if l.Buffers != nil {
		out = append(out, stage{name: StageBufferStatus, acts: true, run: l.capacityBufferStatus})
	}
	if l.ScaleDown != nil {
		out = append(out, stage{name: StageScaleDown, acts: true, run: l.scaleDown})
	}
	out = append(out, stage{name: StageReport, acts: true, run: l.report})
	if l.Disagree != nil {
		out = append(out, stage{name: StageDisagree, acts: true, run: l.disagreements})
	}
	if l.Status != nil {
		out = append(out, stage{name: StageStatus, acts: true, run: l.status})
	}
	if l.NodeGroupObjects != nil {
		out = append(out, stage{name: StageNodeGroupObjects, acts: true, run: l.nodeGroupObjects})
	}
	return extend(out, l.Extensions)
}

func (l *Loop) refresh(ctx context.Context, p *Pass) error {
	if err := l.Provider.Refresh(ctx); err != nil {
		return failed("cloudProviderError", fmt.Errorf("refresh cloud provider: %w", err))
	}
	return nil
}

// vet names the pods' annotations and the drivers' slices the pass
// cannot use; it changes nothing the pass does with them.
func (l *Loop) vet(_ context.Context, p *Pass) error {
	l.Vet.Run(p.cluster, p.StartedAt)
	return nil
}

// observe reads the cluster and judges whether it is healthy enough to
// act on (too many unready nodes: plan only).
func (l *Loop) observe(ctx context.Context, p *Pass) error {
	state, err := l.Observer.Observe()
	if err != nil {
		return failed("apiCallError", fmt.Errorf("observe: %w", err))
	}
	p.cluster = state
	verdict := health.Check(state.Nodes, p.StartedAt, health.Options{MaxUnreadyPercentage: l.Options.Health.MaxTotalUnreadyPercentage,
		OkUnreadyCount: l.Options.Health.OkTotalUnreadyCount, StartupTime: l.Options.MaxNodeProvisionTime})
	if p.Unsafe = verdict.Reason; !verdict.Healthy {
		klog.FromContext(ctx).Info("Cluster unhealthy; planning only, no scale-up or scale-down", "reason", verdict.Reason)
	}
	return nil
}

func (l *Loop) collectGroups(ctx context.Context, p *Pass) error {
	state := p.cluster
	// Templates are judged against this pass's classes and claim
	// templates, not the last pass's snapshot.
	if err := load.Prepare(ctx, l.Runner.Snapshot(), state); err != nil {
		return failed("snapshotError", err)
	}
	slicesByNode, podsByNode := indexByNode(state)
	ids, sizes := l.Groups, l.Sizes
	if ids == nil {
		var err error
		if ids, sizes, err = nodegroups.Restrict(l.Provider.NodeGroups(), l.Options.NodeGroups); err != nil {
			return failed("cloudProviderError", fmt.Errorf("node groups: %w", err))
		}
	}
	groups, err := nodegroups.Collect(ctx, nodegroups.CollectInput{Groups: ids, Sizes: sizes, Provider: l.Provider,
		Nodes: state.Nodes, SlicesByNode: slicesByNode, PodsByNode: podsByNode, DaemonSets: state.DaemonSets,
		CSINodes: state.CSINodes, Now: p.StartedAt, MaxProvision: l.Options.MaxNodeProvisionTime,
		PoolStall: l.Options.DRAPoolStallTime}, l.Templates)
	if err != nil {
		return failed("cloudProviderError", err)
	}
	p.Groups = groups
	return nil
}

// track opens the safety gate for the pass (what acts later in it asks
// the same gate), then follows the scale-ups in flight and gives up what
// failed.
func (l *Loop) track(ctx context.Context, p *Pass) error {
	in := safety.PassInput{Unsafe: p.Unsafe, Groups: p.Groups, Now: p.StartedAt}
	if l.ScaleDown != nil {
		in.InFlight = l.ScaleDown.InFlight()
	}
	l.Gate.Open(in)
	p.Failures = l.Tracker.Update(ctx, p.Groups, p.StartedAt)
	for _, f := range p.Failures {
		l.Metrics.FailedScaleUps.WithLabelValues(f.Reason).Inc()
	}
	l.Reporter.Instances(p.Failures, l.Tracker.TakeErrors())
	return nil
}

// buildSnapshot loads the cluster into the simulation. A snapshot missing
// part of the cluster would make every decision on a wrong picture: the
// pass stops before anything acts.
func (l *Loop) buildSnapshot(ctx context.Context, p *Pass) error {
	start := time.Now()
	built, err := load.Build(ctx, l.Runner.Snapshot(), p.cluster, p.Groups, load.Options{ExpendableCutoff: l.Options.ExpendablePodsPriorityCutoff, Runner: l.Runner,
		PodInfos: l.PodInfos})
	l.Metrics.Observe("snapshot", start)
	if err != nil {
		return failed("snapshotError", fmt.Errorf("snapshot: %w", err))
	}
	p.built = built
	return nil
}

// countReservations counts the reservations once for the pass: the
// pass's planner, scale-down, the status and the upkeep read this count.
func (l *Loop) countReservations(ctx context.Context, p *Pass) error {
	p.reserved = l.Reservations.Count(ctx, p.Groups, p.cluster.Pods, p.StartedAt)
	p.planner = l.Planner
	if p.reserved != nil {
		p.planner = l.Planner.WithCapacity(p.reserved)
	}
	return nil
}

func (l *Loop) reservationUpkeep(ctx context.Context, p *Pass) error {
	l.Upkeep.Run(ctx, p.reserved, p.cluster.Pods)
	return nil
}

// pendingSelection is how the pass picks the pods to scale for.
func (l *Loop) pendingSelection(p *Pass) observe.PendingSelection {
	sel := observe.PendingSelection{
		NewPodScaleUpDelay: l.Options.NewPodScaleUpDelay,
		PriorityCutoff:     l.Options.ExpendablePodsPriorityCutoff,
		SchedulerName:      corev1.DefaultSchedulerName,
		Nodes:              observe.Registered(p.cluster.Nodes),
		VolumeBindings:     p.cluster.VolumeBindings,
	}
	if p.built != nil && len(p.built.Unheld) > 0 {
		sel.Unheld = map[types.UID]bool{}
		for _, pod := range p.built.Unheld {
			sel.Unheld[pod.UID] = true
		}
	}
	return sel
}

// pending picks the pods to scale for and splits them into gangs and
// single pods; usage starts from what exists and is coming.
func (l *Loop) pending(ctx context.Context, p *Pass) error {
	pending := observe.Pending(p.cluster.Pods, l.pendingSelection(p), p.StartedAt)
	if l.ProvReqs != nil {
		pending = provreq.WithoutConsumers(pending)
	}
	l.Metrics.UnschedulablePodsCount.Set(float64(len(pending)))
	for _, x := range p.extra {
		if !containsPod(pending, x) {
			pending = append(pending, x)
			p.added = append(p.added, x)
		}
	}
	p.gangs, p.loose, p.waiting = gang.Split(pending, p.cluster.Pods, p.cluster.PodGroups)
	p.usage = clusterUsage(p.cluster.Nodes, p.Groups)
	return nil
}

// provisioningRequests books and requests capacity before gangs and pods
// ask.
func (l *Loop) provisioningRequests(ctx context.Context, p *Pass) error {
	if p.Unsafe != "" || !l.Gate.Leads() {
		return nil
	}
	p.Results, p.usage = l.ProvReqs.Run(ctx, provreq.ProcessInput{Runner: l.Runner, Candidates: p.built.Candidates(),
		Groups: p.Groups, Usage: p.usage, Planner: p.planner, Pods: p.cluster.Pods, Now: p.StartedAt})
	return nil
}

// planGangs plans each gang whole or not at all; what it gets is taken
// before single pods are fitted.
func (l *Loop) planGangs(ctx context.Context, p *Pass) error {
	outcomes, usage, err := p.planner.PlanGangs(ctx, l.Runner, p.gangs, p.built.Candidates(), p.Groups, p.usage, p.StartedAt)
	p.usage = usage
	if err != nil {
		return failed("simulationError", err)
	}
	p.Gangs = outcomes
	for _, o := range outcomes {
		p.ups = append(p.ups, o.ScaleUps...)
	}
	return nil
}

func (l *Loop) fitExisting(ctx context.Context, p *Pass) error {
	start := time.Now()
	l.Placement.StartPass()
	opts := fitexisting.Options{ClassOf: l.ClassOf, Memoizable: l.Memoizable, Rank: l.Placement.RankFeasible, PodInfo: l.PodInfos.Of}
	if l.NodeKeys != nil {
		keys, err := l.NodeKeys(l.Runner.Snapshot(), p.loose)
		if err != nil {
			return failed("simulationError", err)
		}
		opts.Keys, opts.Copier = keys, l.Copier
	}
	rest, fits, err := fitexisting.FitWith(ctx, l.Runner, p.loose, p.built.Candidates(), opts)
	l.Placement.EndPass(ctx)
	if err != nil {
		return failed("simulationError", err)
	}
	l.Placement.LogChoices(ctx, fits)
	l.Metrics.Observe("filterOutSchedulable", start)
	p.Pending, p.FitsNow, p.Fits = rest, len(fits), fits
	return nil
}

func (l *Loop) plan(ctx context.Context, p *Pass) error {
	if len(p.Pending) == 0 {
		return nil
	}
	start := time.Now()
	plan, err := p.planner.Plan(ctx, p.Pending, p.Groups, p.usage, p.StartedAt)
	l.Metrics.Observe("scaleUp", start)
	if err != nil {
		return failed("simulationError", err)
	}
	p.Plan = plan
	p.ups = append(p.ups, plan.ScaleUps...)
	return nil
}

// act makes the planned scale-ups. ProvisioningRequests' count as any
// other: for the reservations' counters and the scale-down cooldown.
func (l *Loop) act(ctx context.Context, p *Pass) error {
	switch {
	case len(p.ups) > 0 && p.Unsafe != "":
		klog.FromContext(ctx).Info("Cluster unhealthy; planned scale-ups not made", "reason", p.Unsafe, "scaleUps", len(p.ups))
	case len(p.ups) > 0 && !l.Gate.Leads():
		klog.FromContext(ctx).Info("No longer holding the leader lease; planned scale-ups not made", "scaleUps", len(p.ups))
	case len(p.ups) > 0:
		p.Results = append(p.Results, l.Launcher.Execute(ctx, p.ups, p.StartedAt)...)
	}
	for _, r := range p.Results {
		p.reserved.Launched(r.Group.Id, r.Group.Size(), r.Added, p.StartedAt)
	}
	if len(p.Results) > 0 {
		l.Reporter.ScaleUps(p.Results, p.StartedAt)
	}
	return nil
}
