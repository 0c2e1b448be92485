package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
)

// explainMain is `dra-autoscaler explain [flags] <namespace>/<pod>`: the
// loop's simulation run once, locally, for one pod, with the autoscaler's
// own flags. It only reads the cluster (and the status ConfigMap, for the
// node groups the running autoscaler has backed off) and the provider,
// and cannot do otherwise: its clients refuse writes (readOnlyClients)
// and its provider is the read-only view (newReadOnlyParts), so asking
// why never changes, nor cleans up, what the running autoscaler uses.
func explainMain(ctx context.Context, args []string, out io.Writer) error {
	opts, req, err := config.ParseExplain(args)
	if err != nil {
		return err
	}
	restConfig, client, err := readOnlyClients(opts)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	l, cleanup, err := explainLoop(ctx, opts, client, dyn)
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
// world: no actuator, no events, no status writes, no leader election;
// the provider is read-only. client and dyn must be read-only too.
func explainLoop(ctx context.Context, opts *config.Options, client kubernetes.Interface, dyn dynamic.Interface) (*loop.Loop, func(), error) {
	p, cleanup, err := newReadOnlyParts(ctx, opts, client)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*loop.Loop, func(), error) { cleanup(); return nil, nil, err }
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
	if err := p.runner.StartInformers(informerCtx, 2*time.Minute); err != nil {
		stopInformers()
		return fail(err)
	}
	crs := observe.NewCapacityReservations(dyn, client.Discovery())
	if err := crs.Start(informerCtx, 2*time.Minute); err != nil {
		stopInformers()
		return fail(fmt.Errorf("CapacityReservation informer: %w", err))
	}
	m := metrics.New()
	// Read-only: the reservations are counted as the loop counts them, but
	// without an upkeep no status, event or drain is written.
	lp := p.loopParts(opts, b, track.New(opts.MaxNodeProvisionTime, b), crs, m)
	lp.Observer = obs
	l := loop.New(lp)
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
