// Package framework runs the real kube-scheduler framework (in-tree
// plugins, DynamicResources and its structured allocator included) against
// the simulator's cluster snapshot: which nodes a pod fits, where it goes,
// and, when it fits nowhere, which plugin rejects it on each node and why.
package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodevolumelimits"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// metricsOnce guards the scheduler's metric registration: NewFramework
// panics on uninitialised metrics, and registering twice panics too.
var metricsOnce sync.Once

// Runner is one scheduler profile bound to one cluster snapshot. It is not
// safe for concurrent use: a scheduling cycle reads the snapshot while its
// Filter calls run in parallel, and SchedulePod writes it afterwards.
type Runner struct {
	fw     schedframework.Framework
	snap   *snapshot.Snapshot
	logger klog.Logger
	// parallelism caps the goroutines of one Filter pass (see forEach).
	parallelism int
	// informers is the real cluster's factory the plugins read (nil: none).
	informers informers.SharedInformerFactory
	// csi is the CSINode lister of the volume-limit plugin.
	csi *csiNodes
	// specs caches defaulted claim template specs (see templateSpec).
	specs map[*resourceapi.ResourceClaimTemplate]resourceapi.ResourceClaimSpec
	// profile is what the profile's plugin arguments add to pods.
	profile *ProfileArgs
}

// New applies the feature gates, then builds the snapshot and the framework
// in that order, because both copy gate values when built. The framework is
// built once and reused: empty the snapshot with Reset between loops
// rather than building a new Runner.
func New(ctx context.Context, opts Options) (*Runner, error) {
	logger := klog.FromContext(ctx)
	if err := ApplyFeatureGates(opts.FeatureGates); err != nil {
		return nil, err
	}
	profile, parallelism, err := loadProfile(opts)
	if err != nil {
		return nil, err
	}
	metricsOnce.Do(func() {
		metrics.InitMetrics()
		metrics.Register()
	})
	snap := snapshot.New(logger)
	// The plugins read the cluster's volumes, storage and namespaces
	// through the factory; pods, nodes and DRA objects come from the
	// snapshot. The client is a fake: nothing the simulation runs may
	// write to the cluster (no Bind or PreBind is ever called).
	client := fake.NewClientset()
	factory := opts.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(client, 0)
	}
	csi := &csiNodes{real: factory.Storage().V1().CSINodes().Lister(), snap: snap, templated: map[string]*storagev1.CSINode{}}
	fw, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		runtime.WithClientSet(client),
		runtime.WithInformerFactory(factory),
		runtime.WithSnapshotSharedLister(snap),
		runtime.WithSharedDRAManager(snap),
		runtime.WithPodGroupManager(snap),
		runtime.WithMutableSnapshotLister(snap.MutableLister()),
		runtime.WithSharedCSIManager(nodevolumelimits.NewCSIManager(csi)),
		runtime.WithParallelism(parallelism),
		runtime.WithLogger(logger),
	)
	if err != nil {
		return nil, fmt.Errorf("build scheduler framework for profile %s: %w", profile.SchedulerName, err)
	}
	logger.V(2).Info("Scheduler framework ready", "profile", profile.SchedulerName, "featureGates", opts.FeatureGates, "parallelism", parallelism)
	return &Runner{fw: fw, snap: snap, logger: logger, parallelism: parallelism, informers: opts.Informers, csi: csi,
		profile: profileArgs(profile, fw.ListPlugins())}, nil
}

// StartInformers starts the informers the plugins asked for at
// construction and waits until they have synced: a pass must not judge a
// pod's volumes against an empty cache. Without a real factory it does
// nothing. Calling it again is harmless.
func (r *Runner) StartInformers(ctx context.Context, timeout time.Duration) error {
	if r.informers == nil {
		return nil
	}
	r.informers.Start(ctx.Done())
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var missing []string
	for typ, ok := range r.informers.WaitForCacheSync(wait.Done()) {
		if !ok {
			missing = append(missing, typ.String())
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("scheduler plugins' informers not synced within %s: %s", timeout, strings.Join(missing, ", "))
	}
	return nil
}

// ShutdownInformers stops the real factory's informers.
func (r *Runner) ShutdownInformers() {
	if r.informers != nil {
		r.informers.Shutdown()
	}
}

// Snapshot returns the snapshot the framework reads. Fill it, fork it and
// revert it freely between calls.
func (r *Runner) Snapshot() *snapshot.Snapshot { return r.snap }

// Profile returns what the running profile's plugin arguments add to
// pods' scheduling (never nil; read-only).
func (r *Runner) Profile() *ProfileArgs {
	if r == nil || r.profile == nil {
		return &ProfileArgs{}
	}
	return r.profile
}

// Framework returns the underlying scheduler framework, for callers that
// drive extension points this package does not wrap (e.g. a pod group
// cycle).
func (r *Runner) Framework() schedframework.Framework { return r.fw }
