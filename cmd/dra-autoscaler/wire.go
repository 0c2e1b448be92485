package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	provreqclient "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/clusterapi"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

// run wires everything and blocks until ctx ends or leadership is lost.
// Every piece of bad configuration fails here, before any scaling.
func run(ctx context.Context, opts *config.Options) error {
	if limit, err := setMemoryLimit(cgroupMemoryFiles); err != nil {
		klog.FromContext(ctx).Error(err, "No memory limit for the garbage collector; it keeps its default target")
	} else if limit > 0 {
		klog.FromContext(ctx).Info("Memory limit for the garbage collector set to 90% of the container's (GOMEMLIMIT overrides it)", "bytes", limit)
	}
	// Every client but the lease's and the events' writes through the
	// fence: a replica that lost the lease writes nothing.
	fence := newLeaseFence(opts.LeaderElection.LeaderElect, opts.LeaderElection.RenewDeadline.Duration)
	unfenced, leaseClient, err := clients(opts)
	if err != nil {
		return err
	}
	restConfig := rest.CopyConfig(unfenced)
	restConfig.Wrap(fence.wrap)
	client, err := kubernetes.NewForConfig(builtinTypes(restConfig, opts.KubeClient))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	provreqs, err := provreqclient.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	// The recorder comes first: the provider records on it too, and stops
	// (cleanup) before it does.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: leaseClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cluster-autoscaler"})
	provider, err := newProvider(opts, client, recorder)
	if err != nil {
		return err
	}
	defer func() { _ = provider.Cleanup() }()

	m := metrics.New()
	h := &health{timeout: max(10*opts.ScanInterval, 5*time.Minute)}
	if err := serve(ctx, opts.Address, m, h); err != nil {
		return err
	}
	if opts.Profiling {
		if _, err := serveProfiling(ctx, opts.ProfilingAddress); err != nil {
			return err
		}
	}
	a, err := autoscaler.New(ctx, opts, autoscaler.Env{Mode: autoscaler.Running, Client: client, Dynamic: dyn, ProvisioningRequests: provreqs,
		Provider: provider, Recorder: recorder, Metrics: m, Leading: fence.Held, Done: h.passed, Insecure: insecureReason(provider)})
	if err != nil {
		return err
	}
	defer a.Shutdown()
	autoscale := func(ctx context.Context) error {
		if err := a.Start(ctx); err != nil {
			return err
		}
		defer a.Shutdown()
		h.leading.Store(true)
		h.passed(time.Now())
		klog.InfoS("Autoscaler running", "cloudProvider", provider.Name(), "nodeGroups", len(provider.NodeGroups()), "expanders", a.Chain.Names())
		a.Loop.Run(ctx)
		// Drains under way end with ctx (a failed drain untaints its
		// node); wait for them before the lease goes.
		a.Wait()
		return nil
	}
	if !opts.LeaderElection.LeaderElect {
		return autoscale(ctx)
	}
	return leaderElect(ctx, opts, leaseClient, recorder, fence, autoscale)
}

// clients are the REST config and clientset for --kubeconfig (in-cluster
// configuration without it). Every client of the autoscaler is made from
// this config, so --kube-client-qps and --kube-client-burst bound them all
// (each client has its own rate limiter, as upstream's have).
func clients(opts *config.Options) (*rest.Config, kubernetes.Interface, error) {
	return clientsFor(opts, readWrite)
}

// readOnlyClients are clients' for explain: their transport refuses every
// write (readOnlyConfig).
func readOnlyClients(opts *config.Options) (*rest.Config, kubernetes.Interface, error) {
	return clientsFor(opts, readOnly)
}

func clientsFor(opts *config.Options, acc access) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := restConfig(opts.Kubeconfig, opts.KubeClient)
	if err != nil {
		return nil, nil, err
	}
	if acc == readOnly {
		cfg = readOnlyConfig(cfg)
	}
	client, err := kubernetes.NewForConfig(builtinTypes(cfg, opts.KubeClient))
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	return cfg, client, nil
}

func restConfig(kubeconfig string, kc config.KubeClientOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("--kubeconfig=%s: %w", kubeconfig, err)
	}
	cfg.QPS = float32(kc.QPS)
	cfg.Burst = kc.Burst
	cfg.UserAgent = kc.UserAgent
	return cfg, nil
}

// builtinTypes is cfg for the clientset of built-in types, the only one
// that may speak --kube-api-content-type: custom resources (and so the
// dynamic and ProvisioningRequest clients) have no protobuf encoding.
func builtinTypes(cfg *rest.Config, kc config.KubeClientOptions) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = kc.ContentType
	if kc.ContentType != "application/json" {
		out.AcceptContentTypes = kc.ContentType + ",application/json"
	}
	return out
}

// newProvider builds --cloud-provider. events (nil: none) is where the
// externalgrpc provider tells the server's bad answers.
func newProvider(opts *config.Options, client kubernetes.Interface, events record.EventRecorder) (cloudprovider.CloudProvider, error) {
	return buildProvider(opts, client, events, readWrite)
}

// newReadOnlyProvider is explain's provider: the cloudprovider.ReadOnly
// view of --cloud-provider built on read-only transports (the externalgrpc
// connection's interceptor, the Cluster API clients' readOnlyConfig).
// client must come from readOnlyClients, as the kwok provider writes
// through it.
func newReadOnlyProvider(opts *config.Options, client kubernetes.Interface) (cloudprovider.CloudProvider, error) {
	cp, err := buildProvider(opts, client, nil, readOnly)
	if err != nil {
		return nil, err
	}
	return cloudprovider.ReadOnly(cp), nil
}

func buildProvider(opts *config.Options, client kubernetes.Interface, events record.EventRecorder, acc access) (cloudprovider.CloudProvider, error) {
	switch opts.CloudProvider {
	case kwok.ProviderName:
		if opts.CloudConfig == "" {
			return nil, fmt.Errorf("--cloud-provider=kwok needs --cloud-config (the node groups file)")
		}
		cfg, err := kwok.LoadConfig(opts.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config: %w", err)
		}
		return kwok.New(client, cfg)
	case externalgrpc.ProviderName:
		return newExternalGRPC(opts, events, acc)
	case clusterapi.ProviderName:
		return newClusterAPI(opts, acc)
	default:
		return nil, fmt.Errorf("--cloud-provider=%q: unknown (known: %s, %s, %s)", opts.CloudProvider, kwok.ProviderName, externalgrpc.ProviderName, clusterapi.ProviderName)
	}
}

// newExternalGRPC connects to the server of --cloud-config. A config
// without TLS and without insecure: true fails here, naming the file.
func newExternalGRPC(opts *config.Options, events record.EventRecorder, acc access) (cloudprovider.CloudProvider, error) {
	if opts.CloudConfig == "" {
		return nil, fmt.Errorf("--cloud-provider=externalgrpc needs --cloud-config (the server's address and TLS files)")
	}
	cfg, err := externalgrpc.LoadConfig(opts.CloudConfig)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	var popts []externalgrpc.ProviderOption
	if events != nil {
		popts = append(popts, externalgrpc.WithEvents(events, statusObject(opts)))
	}
	if acc == readOnly {
		popts = append(popts, externalgrpc.ReadOnly())
	}
	return externalgrpc.Connect(cfg, popts...)
}

// insecureReason says why the provider's connection is not secure ("":
// it is, or the question does not apply), for the status.
func insecureReason(cp cloudprovider.CloudProvider) string {
	if p, ok := cp.(interface{ InsecureReason() string }); ok {
		return p.InsecureReason()
	}
	return ""
}

// statusObject is the status ConfigMap: events about a node group, which
// is no Kubernetes object, go there (as upstream's do).
func statusObject(opts *config.Options) *corev1.ObjectReference {
	return autoscaler.StatusObject(opts)
}

// newClusterAPI reaches the management cluster through --cloud-config (a
// kubeconfig), else --kubeconfig, as upstream's clusterapi provider does.
// Read-only, its clients refuse writes and it records no events.
func newClusterAPI(opts *config.Options, acc access) (cloudprovider.CloudProvider, error) {
	kubeconfig := opts.CloudConfig
	if kubeconfig == "" {
		kubeconfig = opts.Kubeconfig
	}
	cfg, err := restConfig(kubeconfig, opts.KubeClient)
	if err != nil {
		return nil, fmt.Errorf("clusterapi management cluster: %w", err)
	}
	if acc == readOnly {
		cfg = readOnlyConfig(cfg)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clusterapi management cluster: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clusterapi management cluster: %w", err)
	}
	var events kubernetes.Interface
	if acc == readWrite {
		if events, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("clusterapi management cluster: %w", err)
		}
	}
	return clusterapi.New(context.Background(), clusterapi.Options{Dynamic: dyn, Discovery: disc, AutoDiscovery: opts.NodeGroupAutoDiscovery, EventClient: events})
}

// shutdownGrace bounds how long a leader that stops (lease lost, or
// SIGTERM) waits for its pass and its drains to end before it gives the
// lease up.
const shutdownGrace = 30 * time.Second

// leaderElect runs fn while this replica holds the Lease; losing the lease
// ends the process (a fresh start re-syncs state), as upstream does.
//
// client-go releases the lease as soon as its renew loop ends, without
// waiting for the leader's callback; then the next leader could start
// while this one is still in the middle of a scale-up or a drain. So the
// election runs on a context of its own that is cancelled only after fn
// has returned (or shutdownGrace passed): fn stops first, the lease goes
// after.
func leaderElect(ctx context.Context, opts *config.Options, client kubernetes.Interface, recorder record.EventRecorder, fence *leaseFence,
	fn func(context.Context) error) error {
	le := opts.LeaderElection
	host, _ := os.Hostname()
	id := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName, client.CoreV1(), client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: recorder})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var leading atomic.Bool
	// finished is closed once fn has returned runErr.
	var runErr error
	finished := make(chan struct{})
	go func() {
		<-runCtx.Done()
		if !leading.Load() {
			stopElection() // not leading: nothing to wait for
			return
		}
		select {
		case <-finished:
		case <-time.After(shutdownGrace):
			klog.InfoS("Autoscaler did not stop in time; giving the lease up anyway", "grace", shutdownGrace)
			stopElection()
		}
	}()
	leaderelection.RunOrDie(electCtx, leaderelection.LeaderElectionConfig{
		Lock:            fence.lock(lock),
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				leading.Store(true)
				klog.InfoS("Became leader", "identity", id)
				// The lease's context ends when it is lost.
				go func() {
					select {
					case <-leaseCtx.Done():
						stopRun()
					case <-runCtx.Done():
					}
				}()
				runErr = fn(runCtx)
				close(finished)
				stopElection()
			},
			OnStoppedLeading: func() {
				klog.InfoS("Stopped leading", "identity", id)
				stopRun()
			},
		},
	})
	if !leading.Load() {
		return nil
	}
	select {
	case <-finished:
		return runErr
	case <-time.After(shutdownGrace):
		return fmt.Errorf("the autoscaler did not stop within %s of losing the lease", shutdownGrace)
	}
}
