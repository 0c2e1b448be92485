// Package loop runs the autoscaler: every --scan-interval (or earlier, when
// new unschedulable pods appear) one pass through the stages
//
//	observe → track → snapshot → fit existing → plan → act → report
//
// each in its own package under pkg/stages. RunOnce is the whole pass and
// reads top to bottom; the stages hold the logic.
package loop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/placement"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations/upkeep"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stranded"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/vet"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Parts are what the stages of a pass work with and what lives across
// passes. The optional ones are nil when the feature is off; Stages
// leaves their stages out.
type Parts struct {
	Options  *config.Options
	Clock    clock.PassiveClock
	Provider cloudprovider.CloudProvider
	// Groups and Sizes fix the node groups (unit tests); nil: every pass
	// reads them from the provider after its Refresh, restricted by
	// --nodes, so groups a provider discovers later (Cluster API
	// auto-discovery, an external server) are scaled without a restart.
	Groups    []cloudprovider.NodeGroup
	Sizes     map[string]config.NodeGroupSpec
	Observer  *observe.Observer
	Runner    *framework.Runner
	Templates nodegroups.TemplateBuilder
	Tracker   *track.Tracker
	Backoff   *backoff.Backoff
	Planner   *plan.Planner
	Launcher  *act.Launcher
	Reporter  *report.Reporter
	Metrics   *metrics.Metrics
	// ScaleDown removes unneeded nodes; nil disables scale-down.
	ScaleDown *scaledown.Controller
	// Gate is asked before anything destructive (the tracker's give-ups,
	// scale-down, block drains): the stages that act hold it, the loop
	// opens it each pass. Nil in explain, which destroys nothing.
	Gate *safety.Gate
	// ProvReqs serves ProvisioningRequests; nil when the cluster has none.
	ProvReqs *provreq.Processor
	// Buffers serves CapacityBuffers; nil disables them.
	Buffers *buffers.Processor
	// Reservations counts reserved capacity (nil: none); Upkeep acts on
	// each pass's count (nil: nothing written, as in explain).
	Reservations *reservations.Policy
	Upkeep       *upkeep.Keeper
	// ClassOf groups equivalent pods for the fit-existing stage;
	// Memoizable (optional) says which classes' fits depend on their node
	// alone, so the stage need not filter a node twice for them.
	ClassOf    func(*corev1.Pod) string
	Memoizable func(*corev1.Pod) bool
	// NodeKeys (optional) tells the stage, per pass, which nodes look
	// alike to the filters, so it asks about one node of each kind.
	NodeKeys func(*snapshot.Snapshot, []*corev1.Pod) (fitexisting.Keys, error)
	// Copier (optional, with NodeKeys) copies placements between nodes
	// with equal keys instead of scheduling each pod again.
	Copier fitexisting.Copier
	// Stranded measures stranded DRA capacity; Placement ranks the nodes
	// pods fit and applies the prioritized-list policy. Both optional.
	Stranded  *stranded.Meter
	Placement *placement.Placer
	// Vet tells the owners of pod annotations and ResourceSlices the
	// pass cannot use; optional.
	Vet *vet.Vetter
	// OnPass, if set, is told when a pass finished without error.
	OnPass func(time.Time)
	// Extensions are stages features outside the loop add to the pass,
	// each right after the stage it names.
	Extensions []Extension
	// Disagree detects where the scheduler does not do what the
	// simulation says; Status writes the status ConfigMap. Each optional.
	Disagree *disagree.Detector
	Status   *status.Writer
	// NodeGroupObjects writes a NodeGroup object per group; optional.
	NodeGroupObjects *objects.Publisher
	// PodInfos keeps pods' scheduler PodInfos from pass to pass, for the
	// snapshot and fit-existing (and whatever else the caller gave it
	// to, the estimator); New makes one when nil.
	PodInfos *load.PodInfos
}

// Loop runs passes over its parts.
type Loop struct {
	Parts
	statusBuilder status.Builder
}

// New is the one way to assemble a loop: the binary, explain and the
// tests all call it, so they run the same pass.
func New(p Parts) *Loop {
	if p.PodInfos == nil {
		p.PodInfos = load.NewPodInfos()
	}
	return &Loop{Parts: p}
}

// Warm has the Observer's handlers make, as objects arrive, what a pass
// would otherwise make of each while the user waits: a pod's scheduler
// PodInfo, and what node keys read of a slice (its digest and device
// ids). Call it before the Observer starts.
func (l *Loop) Warm() error {
	if err := l.Observer.OnPods(l.PodInfos.Warm); err != nil {
		return err
	}
	var slices *snapshot.SliceWarmer
	if l.Runner != nil {
		slices = l.Runner.Snapshot().SliceWarmer()
	}
	return l.Observer.OnSlices(slices.Warm, slices.Forget)
}

// Pass is what one RunOnce saw and did, for tests and the status.
type Pass struct {
	Groups    []*nodegroups.Info
	Pending   []*corev1.Pod
	FitsNow   int
	Plan      *plan.Plan
	Results   []act.LaunchResult
	Gangs     []plan.GangOutcome
	Failures  []track.Failure
	ScaleDown *scaledown.PassResult
	StartedAt time.Time
	// Fits are the pending pods the simulation placed on existing or
	// upcoming nodes, and where.
	Fits          map[*corev1.Pod]string
	Disagreements []disagree.Disagreement
	// Buffers is what the pass did for the CapacityBuffers (nil: none).
	Buffers *buffers.Outcome
	// Unsafe says why the cluster was too unhealthy to autoscale (too
	// many unready nodes): the pass planned but neither scaled up nor
	// down. Empty when it was safe.
	Unsafe string

	state
}

// Cluster is what the pass observed (nil before its observe stage ran),
// for extensions, which read the cluster as the pass saw it.
func (p *Pass) Cluster() *observe.ClusterState { return p.cluster }

// RunOnce is one pass of the loop. A panic inside it (a scheduler plugin
// on a malformed object, a provider's bug) ends the pass as an error
// instead of the process: nothing more acts in it, and the next pass
// starts afresh from what it observes.
func (l *Loop) RunOnce(ctx context.Context) (pass *Pass, err error) {
	now := l.Clock.Now()
	pass = &Pass{StartedAt: now}
	defer l.Metrics.Observe("main", now)
	defer func() {
		if r := recover(); r != nil {
			pass, err = l.recovered(ctx, pass, r)
		}
	}()
	l.Metrics.Activity("main", now)
	return l.run(ctx, pass, now)
}

func (l *Loop) run(ctx context.Context, pass *Pass, now time.Time) (*Pass, error) {
	stages, err := l.Stages()
	if err != nil {
		return l.fail(pass, "configurationError", err)
	}
	// Durations are wall time whatever l.Clock is: they are for operators.
	last := time.Now()
	timed := func(name string) error {
		l.Metrics.ObserveStage(name, time.Since(last))
		last = time.Now()
		return nil
	}
	if err := runStages(ctx, stages, pass, false, timed); err != nil {
		kind := "simulationError"
		if se, ok := err.(*stageError); ok {
			kind = se.kind
		}
		return l.fail(pass, kind, err)
	}
	if pass.Unsafe != "" {
		l.Metrics.ClusterSafeToAutoscale.Set(0)
	} else {
		l.Metrics.ClusterSafeToAutoscale.Set(1)
		l.Metrics.Activity("autoscaling", now)
	}
	if l.OnPass != nil {
		l.OnPass(l.Clock.Now())
	}
	return pass, nil
}

// report tells pods, PodGroups and the metrics what this pass decided.
func (l *Loop) report(_ context.Context, pass *Pass) error {
	state, waiting, now := pass.cluster, pass.waiting, pass.StartedAt
	if pass.Plan != nil {
		l.Reporter.NotHelped(pass.Plan.NotHelped, pass.Plan.Reasons, now)
	}
	l.Reporter.Gangs(gangReports(pass.Gangs, waiting, state), now)
	l.Reporter.Groups(pass.Groups, state.Nodes)
	l.Reporter.StalledPools(pass.Groups, state.Nodes, l.Options.DRAPoolStallTime, now)
	l.Metrics.NodeGroupBackedOff.Reset()
	for _, g := range pass.Groups {
		if st, off := l.Backoff.Get(g.Id, now); off {
			l.Metrics.NodeGroupBackedOff.WithLabelValues(g.Id, st.Reason).Set(1)
		}
	}
	l.Reporter.Forget(alive(state))
	return nil
}

// clusterUsage counts the registered nodes and the nodes still coming,
// which limits must include so no scale-up overshoots while others boot.
func clusterUsage(nodes []*corev1.Node, groups []*nodegroups.Info) limits.Usage {
	var u limits.Usage
	for _, n := range nodes {
		u.Add(n, 1)
	}
	for _, g := range groups {
		if g.Template != nil {
			u.Add(g.Template.Node, g.Upcoming())
		}
	}
	return u
}

func (l *Loop) fail(pass *Pass, kind string, err error) (*Pass, error) {
	var pe *framework.PanicError
	if errors.As(err, &pe) {
		kind = "panic"
	}
	l.Metrics.Errors.WithLabelValues(kind).Inc()
	l.Metrics.ClusterSafeToAutoscale.Set(0)
	l.writeStatus(context.Background(), pass, nil, err, l.Clock.Now())
	return pass, err
}

// recovered ends a pass that panicked: the error and its stack are
// logged, counted as a panic, and the snapshot's forks left open by the
// unwinding are closed so the next pass can reset it.
func (l *Loop) recovered(ctx context.Context, pass *Pass, r any) (*Pass, error) {
	err := fmt.Errorf("panic in the pass: %v", r)
	klog.FromContext(ctx).Error(err, "Recovered from a panic; the pass stops, the next one runs as usual", "stack", string(debug.Stack()))
	if snap := l.Runner.Snapshot(); snap != nil {
		for snap.Depth() > 0 {
			if rerr := snap.Revert(); rerr != nil {
				break
			}
		}
	}
	return l.fail(pass, "panic", err)
}

// Run runs passes until ctx ends: every scan interval, and soon after new
// unschedulable pods appear (at most once per second, so a burst of pod
// creations causes one pass, not hundreds).
func (l *Loop) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(l.Options.ScanInterval)
	defer ticker.Stop()
	for {
		if _, err := l.RunOnce(ctx); err != nil {
			logger.Error(err, "Autoscaler pass failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-l.Observer.Triggered():
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func indexByNode(state *observe.ClusterState) (map[string][]*resourceapi.ResourceSlice, map[string][]*corev1.Pod) {
	slices := map[string][]*resourceapi.ResourceSlice{}
	for _, s := range state.ResourceSlices {
		if s.Spec.NodeName != nil {
			slices[*s.Spec.NodeName] = append(slices[*s.Spec.NodeName], s)
		}
	}
	pods := map[string][]*corev1.Pod{}
	for _, p := range state.Pods {
		if p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p)
		}
	}
	return slices, pods
}

// alive are the objects events may still go to.
func alive(state *observe.ClusterState) map[types.UID]bool {
	m := make(map[types.UID]bool, len(state.Pods)+len(state.PodGroups))
	for _, p := range state.Pods {
		m[p.UID] = true
	}
	for _, g := range state.PodGroups {
		m[g.UID] = true
	}
	return m
}
