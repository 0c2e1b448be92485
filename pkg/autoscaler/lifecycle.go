package autoscaler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// syncTimeout bounds each informer start.
const syncTimeout = 2 * time.Minute

// Start starts what the passes read, once this replica leads: the
// cluster's informers (their handlers making, as objects arrive, what a
// pass would otherwise make while the user waits: pods' scheduler
// PodInfos, slices' facts, claims' allocation indexes),
// ProvisioningRequests' when they are served, CapacityReservations',
// CapacityBuffers' and the simulated scheduler's own. Everything stops
// with ctx; Shutdown waits for it.
func (a *Autoscaler) Start(ctx context.Context) error {
	client := a.env.Client
	served, err := observe.Discover(client)
	if err != nil {
		return fmt.Errorf("API discovery: %w", err)
	}
	obs := observe.New(client, served)
	if err := obs.OnPods(a.podInfos.Warm); err != nil {
		return err
	}
	slices := a.Runner.Snapshot().SliceWarmer()
	if err := obs.OnSlices(slices.Warm, slices.Forget); err != nil {
		return err
	}
	claims := a.Runner.Snapshot().ClaimWarmer()
	if err := obs.OnClaims(claims.Warm, claims.Forget); err != nil {
		return err
	}
	if err := obs.Start(ctx, syncTimeout); err != nil {
		return err
	}
	a.stops = append(a.stops, obs.Shutdown)
	a.observe.Observer = obs
	if a.env.ProvisioningRequests != nil {
		p, err := provreq.Start(ctx, a.env.ProvisioningRequests, client, a.opts.ProvisioningRequests, a.Planner, a.Launcher, a.recorder)
		if err != nil {
			return err
		}
		a.stops = append(a.stops, p.Shutdown)
		a.provreqs.P = p
	}
	if a.crs != nil {
		if err := a.crs.Start(ctx, syncTimeout); err != nil {
			return fmt.Errorf("CapacityReservation informer: %w", err)
		}
	}
	if a.bufferWatch != nil {
		if err := a.bufferWatch.Start(ctx, syncTimeout); err != nil {
			return fmt.Errorf("CapacityBuffer informers: %w", err)
		}
		a.stops = append(a.stops, a.bufferWatch.Shutdown)
	}
	return a.Runner.StartInformers(ctx, syncTimeout)
}

// Observer is the informers Start started (nil before).
func (a *Autoscaler) Observer() *observe.Observer { return a.observe.Observer }

// Shutdown stops the informers (after the context given to Start is
// done), most recent first. The provider is the caller's.
func (a *Autoscaler) Shutdown() {
	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
	a.stops = nil
}

// Wait blocks until the removals under way have ended (they end with the
// context they were started with): for shutdown and handover.
func (a *Autoscaler) Wait() { a.ScaleDown.Wait() }

// nodeGroupObjects is the NodeGroup objects' publisher (nil with
// --write-node-group-objects=false, or without a dynamic client). The
// objects belong to the autoscaler its leader lease names: its replicas
// share them, another autoscaler's are left alone.
func (a *Autoscaler) nodeGroupObjects(limiter *limits.Limiter, pricing cloudprovider.PricingModel, runner *framework.Runner) *objects.Publisher {
	opts := a.opts
	if !opts.WriteNodeGroupObjects || a.env.Dynamic == nil {
		return nil
	}
	owner := objects.Identity(opts.LeaderElection.ResourceNamespace, opts.LeaderElection.ResourceName)
	return objects.New(a.env.Dynamic, owner, objects.Sources{Limiter: limiter, Backoff: a.Backoff, Pricing: pricing,
		ProvisionTimes: a.Tracker.ProvisionTimes, Devices: estimator.NewDeviceCounter(runner).Count,
		ScaleUpFromZero: opts.ScaleUpFromZero})
}

// groupIDs are the ids of the groups the loop scales, including those a
// pass left out for an invalid answer of the provider.
func (a *Autoscaler) groupIDs(s *nodegroups.Stage) []string {
	groups, _, err := s.IDs()
	if err != nil {
		return nil
	}
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.Id()
	}
	return ids
}

// StatusObject is the status ConfigMap: events about a node group, which
// is no Kubernetes object, go there (as upstream's do).
func StatusObject(opts *config.Options) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: opts.Namespace, Name: opts.StatusConfigMapName}
}

// nodeKeys is estimator.NewNodeKeys under runner's profile as
// fit-existing takes it: no keys is a nil interface.
func nodeKeys(runner *framework.Runner) func(*snapshot.Snapshot, []*corev1.Pod) (fitexisting.Keys, error) {
	return func(snap *snapshot.Snapshot, pending []*corev1.Pod) (fitexisting.Keys, error) {
		keys, err := estimator.NewNodeKeys(snap, runner.Profile(), pending)
		if keys == nil {
			return nil, err
		}
		return keys, nil
	}
}

// closeForks closes the snapshot's forks a panicking pass left open, so
// the next pass can reset it.
func closeForks(snap *snapshot.Snapshot) {
	for snap != nil && snap.Depth() > 0 {
		if err := snap.Revert(); err != nil {
			return
		}
	}
}

// RunOnce is one pass (for tests and benchmarks).
func (a *Autoscaler) RunOnce(ctx context.Context) (*pass.State, error) { return a.Loop.RunOnce(ctx) }

// Explain explains what a pass, without the stages that act, decides for
// one pod (`dra-autoscaler explain`).
func (a *Autoscaler) Explain(ctx context.Context, key types.NamespacedName) (*explain.Report, error) {
	return explain.Run(ctx, a.Loop, a.Runner, a.Pending, key, a.env.Clock.Now())
}
