package main

import (
	"context"
	"fmt"
	"io"
	"time"

	provreqclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
)

// explainMain is `dra-autoscaler explain [flags] <namespace>/<pod>`: the
// loop's pass run once, locally, without the stages that act, for one
// pod, with the autoscaler's own flags and its one wiring
// (autoscaler.New). It only reads the cluster (and the status ConfigMap,
// for the node groups the running autoscaler has backed off) and the
// provider, and cannot do otherwise: its clients refuse writes
// (readOnlyClients) and its provider is the read-only view, so asking why
// never changes, nor cleans up, what the running autoscaler uses.
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
	provreqs, err := provreqclient.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	provider, err := newReadOnlyProvider(opts, client)
	if err != nil {
		return err
	}
	defer func() { _ = provider.Cleanup() }()
	a, err := autoscaler.New(ctx, opts, autoscaler.Env{Mode: autoscaler.Explaining, Client: client, Dynamic: dyn, ProvisioningRequests: provreqs,
		Provider: provider})
	if err != nil {
		return err
	}
	seedBackoff(ctx, client, opts, a.Backoff)
	// The informers stop only once their context is done.
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer a.Shutdown()
	defer stopInformers()
	if err := a.Start(informerCtx); err != nil {
		return err
	}
	rep, err := a.Explain(ctx, req.Pod)
	if err != nil {
		return fmt.Errorf("explain %s: %w", req.Pod, err)
	}
	return explain.Write(out, rep, req.Output)
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
