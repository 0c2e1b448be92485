// Package autoscaler is the one wiring of the autoscaler: from the options
// and the world it runs in (clients, provider, recorder) it builds the
// parts and the list of stages the loop runs. The binary, `explain`, the
// unit tests and the loop benchmark all build it here, so they cannot
// decide differently; `explain` is the same wiring in read-only mode
// (docs/design/stages.md).
package autoscaler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/health"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/placement"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations/upkeep"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/nominate"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/shadow"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stranded"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/vet"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// Mode is what the wiring is for.
type Mode int

const (
	// Running is the autoscaler itself.
	Running Mode = iota
	// Explaining is `explain`: the same parts and stages over writers
	// that cannot write (the Env's read-only clients and provider, no
	// events), and the stages that act are never run.
	Explaining
)

// Env is the world the autoscaler runs in.
type Env struct {
	Mode Mode
	// Client is required; Dynamic (CapacityReservation objects,
	// CapacityBuffers, NodeGroup objects) and ProvisioningRequests may be
	// nil, and those features are off.
	Client               kubernetes.Interface
	Dynamic              dynamic.Interface
	ProvisioningRequests versioned.Interface
	Provider             cloudprovider.CloudProvider
	// Recorder (nil: no events), Metrics (nil: a registry of its own) and
	// Clock (nil: the real one).
	Recorder record.EventRecorder
	Metrics  *metrics.Metrics
	Clock    clock.Clock
	// Leading tells whether this replica holds the leader lease (nil: no
	// election, it always does).
	Leading func() bool
	// Groups and Sizes fix the node groups (unit tests); nil: every pass
	// reads them from the provider, restricted by --nodes.
	Groups []cloudprovider.NodeGroup
	Sizes  map[string]config.NodeGroupSpec
	// Done is told of every pass that ran to its end (the health check).
	Done func(time.Time)
	// Insecure, when set, says the provider's connection is not
	// encrypted (the status shows it).
	Insecure string
	// BufferSource, when set, is where the CapacityBuffers are read from
	// instead of the cluster (unit tests).
	BufferSource buffers.Source
	// Shortcuts, when set, are the simulation's shortcuts instead of
	// those --simulation-disable-shortcuts leaves on (tests: the
	// differential test runs every pass with and without them).
	Shortcuts *shortcut.Set
}

// Autoscaler is the wired autoscaler: the loop and the parts the caller
// starts, runs and stops.
type Autoscaler struct {
	Loop    *loop.Loop
	Runner  *framework.Runner
	Metrics *metrics.Metrics
	// Parts the callers and tests reach.
	Backoff   *backoff.Backoff
	Tracker   *track.Tracker
	Gate      *safety.Gate
	ScaleDown *scaledown.Controller
	Planner   *plan.Planner
	Launcher  *act.Launcher
	Chain     expander.Chain
	// Pending is the stage that picks the pods (explain asks it why a
	// pod is left alone).
	Pending *pending.Stage
	// Checker checks the simulation's shortcuts against the plain
	// framework.
	Checker *shortcut.Checker

	opts        *config.Options
	env         Env
	recorder    record.EventRecorder // env's, or none in explain
	observe     *observe.Stage
	podInfos    *load.PodInfos
	provreqs    *provreq.Service
	crs         *observe.CapacityReservations
	bufferWatch *buffers.Watcher
	stops       []func()
}

// vetGrace is how long a driver's pool may look incomplete or
// contradictory (it publishes slices one by one) before it is reported.
const vetGrace = 10 * time.Second

// New wires the autoscaler. Its informers are not started: Start does
// that, once this replica leads.
func New(ctx context.Context, opts *config.Options, env Env) (*Autoscaler, error) {
	if env.Metrics == nil {
		env.Metrics = metrics.New()
	}
	if env.Clock == nil {
		env.Clock = clock.RealClock{}
	}
	recorder := env.Recorder
	if recorder == nil || env.Mode == Explaining {
		recorder = &record.FakeRecorder{} // drops every event
	}
	a := &Autoscaler{opts: opts, env: env, Metrics: env.Metrics, recorder: recorder}
	m, provider, client := env.Metrics, env.Provider, env.Client
	// Checked here so a --nodes naming no group fails at start; each pass
	// reads the groups again.
	if env.Groups == nil {
		if _, _, err := nodegroups.Restrict(provider.NodeGroups(), opts.NodeGroups); err != nil {
			return nil, err
		}
	}
	// What the scheduler's plugins read of the cluster (volumes, storage,
	// namespaces) is read the same way here.
	runner, err := framework.New(ctx, framework.Options{FeatureGates: opts.FeatureGates, ConfigFile: opts.SchedulerConfigFile,
		Informers: informers.NewSharedInformerFactory(client, 0)})
	if err != nil {
		return nil, fmt.Errorf("simulated scheduler: %w", err)
	}
	a.Runner = runner
	a.stops = append(a.stops, runner.ShutdownInformers)
	// The shortcuts the simulation takes, and their check against the
	// plain framework (sampled, or every decision with --simulation-verify).
	shortcuts := opts.Simulation.Shortcuts()
	if env.Shortcuts != nil {
		shortcuts = env.Shortcuts
	}
	a.Checker = &shortcut.Checker{Set: shortcuts, Verify: opts.Simulation.Verify, FitSamples: opts.Simulation.ShadowFitSamples,
		EstimateSamples: opts.Simulation.ShadowEstimateSamples, EstimatePods: opts.Simulation.ShadowEstimatePods,
		DisableOnMismatch: opts.Simulation.DisableShortcutOnMismatch}
	shadow.Wire(a.Checker, m, klog.FromContext(ctx), recorder)
	est := estimator.New(runner, estimator.Options{Shortcuts: shortcuts, Check: a.Checker})
	est.LogProfile(klog.FromContext(ctx))
	// One PodInfo per pod, kept across passes, for the snapshot,
	// fit-existing and the estimator alike.
	a.podInfos = load.NewPodInfos()
	est.UsePodInfos(a.podInfos.Of)
	analyzer := fragmentation.NewAnalyzer(runner)
	analyzer.Shortcuts = shortcuts
	shapes := fragmentation.NewShapes(opts.Sharing.RequestShapeRetention)
	placer := placement.New(runner, analyzer, shapes, opts.Sharing)
	placer.Unranked = m.Sharing.UnrankedPlacements
	if a.Chain, err = buildExpanders(opts, client, recorder, placer.StrandedFraction(ctx, est), a.podInfos.Requests); err != nil {
		return nil, err
	}
	providerLimits, err := provider.GetResourceLimiter()
	if err != nil {
		return nil, fmt.Errorf("cloud provider limits: %w", err)
	}
	limiter := limits.New(opts, providerLimits)
	var pricing cloudprovider.PricingModel
	if pm, perr := provider.Pricing(); perr == nil {
		pricing = pm
	}
	a.Backoff = backoff.New(opts.InitialNodeGroupBackoffDuration, opts.MaxNodeGroupBackoffDuration, opts.NodeGroupBackoffResetTimeout)
	a.Planner = plan.New(plan.Options{MaxNodesPerScaleUp: opts.MaxNodesPerScaleUp, ScaleUpFromZero: opts.ScaleUpFromZero,
		MaxBinpacking: opts.MaxNodeGroupBinpackingDuration, Balance: similarity(opts)}, est, a.Chain, limiter, a.Backoff, pricing)
	// One gate for everything destructive: the tracker's give-ups and
	// gang undos, scale-down, and the drains of ending capacity blocks.
	a.Gate = safety.New(safety.Options{MaxParallel: opts.ScaleDown.MaxParallelism, MaxEmptyBulk: opts.ScaleDown.MaxEmptyBulkDelete,
		Leading: env.Leading}, m.Safety(), recorder)
	// The tracker taints and re-lists a registered node before it removes
	// it for a failed scale-up, so no running pod dies with it.
	a.Tracker = track.New(opts.MaxNodeProvisionTime, a.Backoff).WithClient(client).WithGate(a.Gate)
	a.Launcher = act.New(a.Tracker, a.Backoff)
	// Block drains evict through the scale-down drainer: one grace period
	// cap, one eviction count.
	drainer := newDrainer(opts, client, recorder, m)
	a.ScaleDown = newScaleDown(opts, runner, client, recorder, m, drainer, a.Checker).WithGate(a.Gate)
	var crsSource reservations.ObjectSource
	if env.Dynamic != nil {
		a.crs = observe.NewCapacityReservations(env.Dynamic, client.Discovery())
		crsSource = a.crs
	}
	reserved := reservations.New(reservations.Options{EndMargin: opts.Reservations.EndMargin, ScaleDownReserved: opts.Reservations.ScaleDownReservedNodes,
		LaunchTTL: opts.MaxNodeProvisionTime}, provider, crsSource, m.Reservations)
	a.provreqs = &provreq.Service{}
	a.observe = &observe.Stage{Health: health.Options{MaxUnreadyPercentage: opts.Health.MaxTotalUnreadyPercentage,
		OkUnreadyCount: opts.Health.OkTotalUnreadyCount, StartupTime: opts.MaxNodeProvisionTime}}
	groups := &nodegroups.Stage{Provider: provider, Fixed: env.Groups, Sizes: env.Sizes, Specs: opts.NodeGroups,
		Prepare: func(ctx context.Context, state *observe.ClusterState) error {
			// Templates are judged against this pass's classes and claim
			// templates, not the last pass's snapshot.
			return load.Prepare(ctx, runner.Snapshot(), state)
		},
		Templates: nodegroups.Templates{Runner: runner}, Defaults: GroupDefaults(opts), PoolStall: opts.DRAPoolStallTime}
	a.Pending = &pending.Stage{Rules: observe.PendingSelection{NewPodScaleUpDelay: opts.NewPodScaleUpDelay,
		PriorityCutoff: opts.ExpendablePodsPriorityCutoff, SchedulerName: runner.Profile().SchedulerName},
		Exclude: a.provreqs.WithoutConsumers, Count: func(n int) { m.UnschedulablePodsCount.Set(float64(n)) }}
	statusRef := StatusObject(opts)
	reporter := report.New(recorder, m, 5*time.Minute).WithStatusObject(statusRef.Namespace, statusRef.Name)
	vetter := vet.New(vetGrace, 5*time.Minute, func(f vet.Finding) {
		recorder.Event(f.Object, corev1.EventTypeWarning, f.Reason, f.Message)
	})

	stages := []pass.Stage{
		nodegroups.RefreshStage(provider),
		a.observe,
		vetter.Stage(),
		groups,
		a.Gate.Stage(a.ScaleDown.InFlight),
		a.Tracker.Stage(func(reason string) { m.FailedScaleUps.WithLabelValues(reason).Inc() }),
		&load.Stage{Runner: runner, PodInfos: a.podInfos, ExpendableCutoff: opts.ExpendablePodsPriorityCutoff, Observe: m.Observe},
		reserved.Stage(),
		upkeep.New(client, env.Dynamic, recorder, drainer).WithGate(a.Gate).Stage(),
		a.Pending,
		&stranded.Stage{Meter: stranded.New(analyzer, shapes, opts.Sharing.StrandedCapacityBudget, m.Sharing), Placer: placer,
			Snapshot: runner.Snapshot, Observe: m.Observe},
		a.provreqs.Stage(runner, a.Planner),
		a.provreqs.LaunchStage(env.Leading),
		a.Planner.GangsStage(runner),
		&fitexisting.Stage{Runner: runner, Ranker: placer, NodeKeys: nodeKeys(runner), Observe: m.Observe,
			Options: fitexisting.Options{ClassOf: est.ClassKey, ClassifyAll: est.ClassifyAll, Memoizable: est.Memoizable, PodInfo: a.podInfos.Of, Copier: est,
				Shortcuts: shortcuts, Check: a.Checker}},
		a.Planner.Stage(m.Observe),
	}
	var bufferStatus pass.Stage
	if src := env.BufferSource; src != nil || env.Dynamic != nil {
		// CapacityBuffers are served once their CRD is (looked for again
		// every minute until it is); their pods are planned after the
		// real ones, their status written once act made the scale-ups.
		if src == nil {
			a.bufferWatch = buffers.NewWatcher(env.Dynamic, client)
			src = a.bufferWatch
		}
		b := buffers.New(src, env.Dynamic, recorder)
		if opts.CapacityBuffers.PodDryRun {
			b.WithAdmission(buffers.DryRun{Client: client})
		}
		stages = append(stages, b.Stage(buffers.StageParts{Runner: runner, Planner: a.Planner, ClassOf: est.ClassKey, Observe: m.Observe}))
		bufferStatus = b.StatusStage()
	}
	stages = append(stages, shadow.Stage(a.Checker), a.Launcher.Stage(env.Leading))
	if bufferStatus != nil {
		stages = append(stages, bufferStatus)
	}
	if opts.Nominations.Enabled {
		// After act, so a pass's own scale-ups are recorded before their
		// nodes can register.
		n := nominate.New(client, nominate.Options{Timeout: opts.Nominations.Timeout, MaxWait: opts.MaxNodeProvisionTime,
			MaxWrites: opts.Nominations.MaxWritesPerPass}, m.Nominations())
		stages = append(stages, n.Stage())
	}
	stages = append(stages,
		&scaledown.Stage{Controller: a.ScaleDown, Observed: a.observe, Gate: a.Gate, Observe: m.Observe,
			Failed: func(kind string) { m.Errors.WithLabelValues(kind).Inc() }},
		reporter.Stage(a.Backoff, opts.DRAPoolStallTime),
		disagree.New(opts.SchedulerDisagreementThreshold, recorder, m).Stage(),
	)
	var st *status.Stage
	if opts.WriteStatusConfigMap {
		w := status.NewWriter(client, opts.Namespace, opts.StatusConfigMapName)
		if env.Insecure != "" {
			w.SetCloudProviderInsecure(env.Insecure)
		}
		st = &status.Stage{Writer: w, Backoff: a.Backoff, Gate: a.Gate, Reservations: reserved, Provider: provider,
			Written: func(result string) { m.StatusWrites.WithLabelValues(result).Inc() }}
		stages = append(stages, st)
	}
	if pub := a.nodeGroupObjects(limiter, pricing, runner); pub != nil {
		stages = append(stages, pub.Stage(func() []string { return a.groupIDs(groups) }))
	}
	cfg := loop.Config{Stages: stages, Inputs: pass.Keys(pending.Extra), Clock: env.Clock, Metrics: m, ScanInterval: opts.ScanInterval,
		Optional: pass.Keys(act.Results),
		Trigger: func() <-chan struct{} {
			if a.observe.Observer == nil {
				return nil
			}
			return a.observe.Observer.Triggered()
		},
		Recover: func() { closeForks(runner.Snapshot()) },
		Done: func(_ context.Context, ps *pass.State) {
			if pass.Get(ps, observe.Unsafe) != "" {
				m.ClusterSafeToAutoscale.Set(0)
			} else {
				m.ClusterSafeToAutoscale.Set(1)
				m.Activity("autoscaling", ps.Started)
			}
			if env.Done != nil {
				env.Done(env.Clock.Now())
			}
		}}
	if st != nil {
		cfg.Failed = st.Failed
	}
	if a.Loop, err = loop.New(cfg); err != nil {
		return nil, err
	}
	return a, nil
}

// GroupDefaults are the flags' values of the options a node group may
// set for itself (cloudprovider.NodeGroupAutoscalingOptions).
func GroupDefaults(opts *config.Options) cloudprovider.NodeGroupAutoscalingOptions {
	sd := opts.ScaleDown
	return cloudprovider.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold: sd.UtilizationThreshold, ScaleDownGpuUtilizationThreshold: sd.GPUUtilizationThreshold,
		ScaleDownUnneededTime: sd.UnneededTime, ScaleDownUnreadyTime: sd.UnreadyTime, MaxNodeProvisionTime: opts.MaxNodeProvisionTime,
	}
}
