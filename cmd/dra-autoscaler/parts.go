package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/placement"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// parts are what the running autoscaler and `explain` build alike, so the
// explanation simulates exactly what the loop would: the provider and its
// groups, the simulated scheduler, the estimator, the placement policy, the
// expanders and the limits.
type parts struct {
	provider cloudprovider.CloudProvider
	groups   []cloudprovider.NodeGroup
	runner   *framework.Runner
	est      *estimator.Estimator
	podInfos *load.PodInfos
	analyzer *fragmentation.Analyzer
	shapes   *fragmentation.Shapes
	placer   *placement.Placer
	chain    expander.Chain
	limiter  *limits.Limiter
	pricing  cloudprovider.PricingModel // nil: the provider has no prices
}

// newParts builds the parts; on error nothing is left to clean up,
// otherwise the caller calls cleanup when done. events may be nil.
func newParts(ctx context.Context, opts *config.Options, client kubernetes.Interface, events record.EventRecorder) (p *parts, cleanup func(), err error) {
	provider, err := newProvider(opts, client, events)
	if err != nil {
		return nil, nil, err
	}
	return assembleParts(ctx, opts, client, events, provider)
}

// newReadOnlyParts are explain's parts: the same, over the read-only view
// of the provider (newReadOnlyProvider), which is all they hold, and no
// events. client must come from readOnlyClients.
func newReadOnlyParts(ctx context.Context, opts *config.Options, client kubernetes.Interface) (p *parts, cleanup func(), err error) {
	provider, err := newReadOnlyProvider(opts, client)
	if err != nil {
		return nil, nil, err
	}
	return assembleParts(ctx, opts, client, nil, provider)
}

// assembleParts builds the parts over provider, which it cleans up on
// error and in the cleanup it returns.
func assembleParts(ctx context.Context, opts *config.Options, client kubernetes.Interface, events record.EventRecorder,
	provider cloudprovider.CloudProvider) (p *parts, cleanup func(), err error) {
	// The returns below clear the named results: keep the provider's own.
	closeProvider := func() { _ = provider.Cleanup() }
	defer func() {
		if err != nil {
			closeProvider()
		}
	}()
	p = &parts{provider: provider}
	// Checked here so a --nodes naming no group fails at start; each pass
	// reads the groups again.
	if p.groups, _, err = nodegroups.Restrict(provider.NodeGroups(), opts.NodeGroups); err != nil {
		return nil, nil, err
	}
	fwOpts := framework.Options{FeatureGates: opts.FeatureGates, ConfigFile: opts.SchedulerConfigFile}
	if client != nil {
		// What the scheduler's plugins read of the cluster (volumes,
		// storage, namespaces), read the same way here.
		fwOpts.Informers = informers.NewSharedInformerFactory(client, 0)
	}
	if p.runner, err = framework.New(ctx, fwOpts); err != nil {
		return nil, nil, fmt.Errorf("simulated scheduler: %w", err)
	}
	p.est = estimator.New(p.runner, estimator.Options{})
	// One PodInfo per pod, kept across passes, for the snapshot,
	// fit-existing and the estimator alike.
	p.podInfos = load.NewPodInfos()
	p.est.UsePodInfos(p.podInfos.Of)
	p.analyzer = fragmentation.NewAnalyzer(p.runner)
	p.shapes = fragmentation.NewShapes(opts.Sharing.RequestShapeRetention)
	p.placer = placement.New(p.runner, p.analyzer, p.shapes, opts.Sharing)
	if p.chain, err = buildExpanders(opts, client, events, p.placer.StrandedFraction(ctx, p.est)); err != nil {
		return nil, nil, err
	}
	providerLimits, err := provider.GetResourceLimiter()
	if err != nil {
		return nil, nil, fmt.Errorf("cloud provider limits: %w", err)
	}
	p.limiter = limits.New(opts, providerLimits)
	if pm, perr := provider.Pricing(); perr == nil {
		p.pricing = pm
	}
	return p, func() { p.runner.ShutdownInformers(); closeProvider() }, nil
}

// planner is the scale-up planner over these parts.
func (p *parts) planner(opts *config.Options, b *backoff.Backoff) *plan.Planner {
	return plan.New(plan.Options{MaxNodesPerScaleUp: opts.MaxNodesPerScaleUp, ScaleUpFromZero: opts.ScaleUpFromZero,
		MaxBinpacking: opts.MaxNodeGroupBinpackingDuration, Balance: similarity(opts)}, p.est, p.chain, p.limiter, b, p.pricing)
}

// loopParts are the parts the running loop and explain share: what the
// pass simulates and plans with. The caller adds what acts and tells.
func (p *parts) loopParts(opts *config.Options, b *backoff.Backoff, tracker *track.Tracker, crs reservations.ObjectSource, m *metrics.Metrics) loop.Parts {
	p.placer.Unranked = m.Sharing.UnrankedPlacements
	reserved := reservations.New(reservations.Options{EndMargin: opts.Reservations.EndMargin, ScaleDownReserved: opts.Reservations.ScaleDownReservedNodes,
		LaunchTTL: opts.MaxNodeProvisionTime}, p.provider, crs, m.Reservations)
	return loop.Parts{
		Options:      opts,
		Clock:        clock.RealClock{},
		Provider:     p.provider,
		Runner:       p.runner,
		Templates:    nodegroups.Templates{Runner: p.runner},
		Tracker:      tracker,
		Backoff:      b,
		Planner:      p.planner(opts, b),
		Metrics:      m,
		ClassOf:      p.est.ClassKey,
		Memoizable:   p.est.Memoizable,
		NodeKeys:     nodeKeys,
		Copier:       p.est,
		Placement:    p.placer,
		Reservations: reserved,
		PodInfos:     p.podInfos,
	}
}

// nodeKeys is estimator.NewNodeKeys as fit-existing takes it: no keys is
// a nil interface.
func nodeKeys(snap *snapshot.Snapshot, pending []*corev1.Pod) (fitexisting.Keys, error) {
	keys, err := estimator.NewNodeKeys(snap, pending)
	if keys == nil {
		return nil, err
	}
	return keys, nil
}
