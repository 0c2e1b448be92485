package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/placement"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/track"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// explainMain is `dra-autoscaler explain [flags] <namespace>/<pod>`: the
// loop's simulation run once, locally, for one pod, with the autoscaler's
// own flags. It only reads the cluster (and the status ConfigMap, for the
// node groups the running autoscaler has backed off).
func explainMain(ctx context.Context, args []string, out io.Writer) error {
	opts, req, err := config.ParseExplain(args)
	if err != nil {
		return err
	}
	restConfig, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	l, cleanup, err := explainLoop(ctx, opts, client)
	if err != nil {
		return err
	}
	defer cleanup()
	rep, err := l.Explain(ctx, req.Pod)
	if err != nil {
		return fmt.Errorf("explain %s: %w", req.Pod, err)
	}
	return explain.Write(out, rep, req.Output)
}

// explainLoop wires the loop as run does, minus what acts or talks to the
// world: no actuator, no events, no status writes, no leader election.
func explainLoop(ctx context.Context, opts *config.Options, client kubernetes.Interface) (*loop.Loop, func(), error) {
	provider, err := newProvider(opts, client)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = provider.Cleanup() }
	fail := func(err error) (*loop.Loop, func(), error) { cleanup(); return nil, nil, err }
	groups, sizes, err := nodegroups.Restrict(provider.NodeGroups(), opts.NodeGroups)
	if err != nil {
		return fail(err)
	}
	runner, err := framework.New(ctx, framework.Options{FeatureGates: opts.FeatureGates, ConfigFile: opts.SchedulerConfigFile})
	if err != nil {
		return fail(fmt.Errorf("simulated scheduler: %w", err))
	}
	est := estimator.New(runner, estimator.Options{})
	placer := placement.New(runner, fragmentation.NewAnalyzer(runner), fragmentation.NewShapes(opts.Sharing.RequestShapeRetention), opts.Sharing)
	chain, err := buildExpanders(opts, client, placer.StrandedFraction(ctx, est))
	if err != nil {
		return fail(err)
	}
	providerLimits, err := provider.GetResourceLimiter()
	if err != nil {
		return fail(fmt.Errorf("cloud provider limits: %w", err))
	}
	b := backoff.New(opts.InitialNodeGroupBackoffDuration, opts.MaxNodeGroupBackoffDuration, opts.NodeGroupBackoffResetTimeout)
	seedBackoff(ctx, client, opts, b)
	served, err := observe.Discover(client)
	if err != nil {
		return fail(fmt.Errorf("API discovery: %w", err))
	}
	obs := observe.New(client, served)
	// The informers stop only once their context is done.
	informerCtx, stopInformers := context.WithCancel(ctx)
	if err := obs.Start(informerCtx, 2*time.Minute); err != nil {
		stopInformers()
		return fail(err)
	}
	l := &loop.Loop{
		Options: opts, Clock: clock.RealClock{}, Provider: provider, Groups: groups, Sizes: sizes,
		Observer: obs, Runner: runner, Templates: nodegroups.Templates{Runner: runner},
		Tracker: track.New(opts.MaxNodeProvisionTime, b), Backoff: b,
		Planner: plan.New(plan.Options{MaxNodesPerScaleUp: opts.MaxNodesPerScaleUp, ScaleUpFromZero: opts.ScaleUpFromZero,
			MaxBinpacking: opts.MaxNodeGroupBinpackingDuration}, est, chain, limits.New(opts, providerLimits), b, nil),
		Metrics: metrics.New(), ClassOf: est.ClassKey, Placement: placer,
	}
	return l, func() { stopInformers(); obs.Shutdown(); cleanup() }, nil
}

// seedBackoff backs off, here too, the groups the running autoscaler's
// status says are backed off; without a status nothing is.
func seedBackoff(ctx context.Context, client kubernetes.Interface, opts *config.Options, b *backoff.Backoff) {
	s, err := status.Read(ctx, client, opts.Namespace, opts.StatusConfigMapName)
	if err != nil || s == nil {
		return
	}
	now := time.Now()
	for _, g := range s.NodeGroups {
		if bi := g.ScaleUp.BackoffInfo; bi != nil && bi.Until.After(now) {
			b.Fail(g.Name, bi.ErrorCode, now)
		}
	}
}
