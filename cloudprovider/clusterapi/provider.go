// Package clusterapi is a cloud provider over Cluster API: its node groups
// are the MachineDeployments, the MachineSets no MachineDeployment owns and
// the MachinePools that carry upstream's min/max size annotations, found
// through dynamic informers on the management cluster (which may differ
// from the workload cluster the autoscaler watches). Scaling goes through
// the scale subresource; scale-down marks the chosen Machines with
// cluster.x-k8s.io/delete-machine before lowering replicas. Templates for
// scale from zero come from upstream's capacity annotations, the
// infrastructure machine template's status.capacity/nodeInfo, and a DRA
// template ConfigMap of our own (docs/providers/clusterapi.md).
package clusterapi

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

var (
	_ cloudprovider.CloudProvider = &Provider{}
	_ cloudprovider.Closer        = &Provider{}
)

// Options configure New.
type Options struct {
	// Dynamic and Discovery reach the management cluster.
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// AutoDiscovery are the --node-group-auto-discovery values; none
	// means every scalable resource with the size annotations.
	AutoDiscovery []string
	// Group is Cluster API's API group ("" = $CAPI_GROUP or the default);
	// Version forces an API version ("" = $CAPI_VERSION, else v1beta2
	// when served, else v1beta1).
	Group, Version string
	// SyncTimeout bounds the wait for the informers (default 1 minute).
	SyncTimeout time.Duration
	Clock       clock.Clock
	Logger      *klog.Logger
	// Events, when set, records a Warning on a scalable resource whose
	// annotations or DRA template are wrong (once per distinct message),
	// where `kubectl describe` of the object shows it.
	Events record.EventRecorder
	// EventClient, when set and Events is not, is where the provider
	// records those events itself (the management cluster).
	EventClient kubernetes.Interface
}

// Provider is the Cluster API cloud provider.
type Provider struct {
	dyn     dynamic.Interface
	disc    discovery.DiscoveryInterface
	keys    keys
	version string
	specs   []discoverySpec
	clock   clock.Clock
	logger  klog.Logger
	timeout time.Duration

	factory dynamicinformer.DynamicSharedInformerFactory
	stop    chan struct{}
	gvr     map[string]schema.GroupVersionResource // by kind
	// listers of the scalable kinds (MachinePool only when served), the
	// Machines and the ConfigMaps (DRA templates).
	scalables  map[string]cache.GenericLister
	machines   cache.GenericLister
	configMaps cache.GenericLister

	// infra informers, started lazily per template kind.
	infraMu      sync.Mutex
	infra        map[schema.GroupVersionResource]cache.GenericLister
	infraStarted map[schema.GroupVersionResource]bool

	// mu guards groups and the snapshot of the last Refresh.
	mu     sync.Mutex
	groups map[string]*nodeGroup
	snap   *snapshot

	events      record.EventRecorder
	broadcaster record.EventBroadcaster
	// warned is the last warning recorded per object (namespace/name of
	// kind), so that a problem is told once, not every loop.
	warnedMu sync.Mutex
	warned   map[string]string
}

// New finds Cluster API's version through discovery, starts the informers
// and waits for them, and takes the first snapshot, so that NodeGroups is
// complete when it returns.
func New(ctx context.Context, o Options) (*Provider, error) {
	if o.Dynamic == nil || o.Discovery == nil {
		return nil, fmt.Errorf("clusterapi provider: a dynamic client and a discovery client are required")
	}
	specs, err := parseDiscoverySpecs(o.AutoDiscovery)
	if err != nil {
		return nil, err
	}
	group := o.Group
	if group == "" {
		group = groupFromEnv()
	}
	p := &Provider{dyn: o.Dynamic, disc: o.Discovery, keys: newKeys(group), specs: specs, clock: o.Clock,
		timeout: o.SyncTimeout, groups: map[string]*nodeGroup{}, infra: map[schema.GroupVersionResource]cache.GenericLister{}, infraStarted: map[schema.GroupVersionResource]bool{},
		gvr: map[string]schema.GroupVersionResource{}, scalables: map[string]cache.GenericLister{}, stop: make(chan struct{}),
		events: o.Events, warned: map[string]string{}}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.timeout <= 0 {
		p.timeout = time.Minute
	}
	p.logger = klog.Background().WithName("clusterapi-provider")
	if o.Logger != nil {
		p.logger = *o.Logger
	}
	if p.events == nil && o.EventClient != nil {
		p.broadcaster = record.NewBroadcaster()
		p.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: o.EventClient.CoreV1().Events("")})
		p.events = p.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cluster-autoscaler"})
	}
	if err := p.discover(o.Version); err != nil {
		p.shutdownEvents()
		return nil, fmt.Errorf("clusterapi provider: %w", err)
	}
	p.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(p.dyn, 0, watchNamespace(specs), nil)
	for kind, gvr := range p.gvr {
		l := p.factory.ForResource(gvr).Lister()
		if kind == kindMachine {
			p.machines = l
		} else {
			p.scalables[kind] = l
		}
	}
	p.configMaps = p.factory.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Lister()
	p.factory.Start(p.stop)
	if err := p.waitForSync(ctx); err != nil {
		_ = p.Cleanup()
		return nil, err
	}
	if err := p.Refresh(ctx); err != nil {
		_ = p.Cleanup()
		return nil, err
	}
	return p, nil
}

func (p *Provider) waitForSync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	for gvr, ok := range p.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("clusterapi provider: the %s informer did not sync within %s (is the management cluster reachable, and may we list it?)", gvr, p.timeout)
		}
	}
	return nil
}

// Kinds of Cluster API objects the provider reads.
const (
	kindMachineDeployment = "MachineDeployment"
	kindMachineSet        = "MachineSet"
	kindMachinePool       = "MachinePool"
	kindMachine           = "Machine"
)

// discover picks the API version (forced, else v1beta2, else v1beta1) and
// the resources it serves; MachinePools are optional.
func (p *Provider) discover(forced string) error {
	groups, err := p.disc.ServerGroups()
	if err != nil {
		return fmt.Errorf("API discovery: %w", err)
	}
	var served []string
	for _, g := range groups.Groups {
		if g.Name == p.keys.group {
			for _, v := range g.Versions {
				served = append(served, v.Version)
			}
		}
	}
	if len(served) == 0 {
		return fmt.Errorf("the management cluster does not serve API group %s (are Cluster API's CRDs installed?)", p.keys.group)
	}
	if forced == "" {
		forced = envVersion()
	}
	switch {
	case forced != "":
		if !containsString(served, forced) {
			return fmt.Errorf("API version %s/%s is not served (served: %v)", p.keys.group, forced, served)
		}
		p.version = forced
	case containsString(served, "v1beta2"):
		p.version = "v1beta2"
	case containsString(served, "v1beta1"):
		p.version = "v1beta1"
	default:
		return fmt.Errorf("API group %s serves %v; this provider reads v1beta2 or v1beta1", p.keys.group, served)
	}
	gv := schema.GroupVersion{Group: p.keys.group, Version: p.version}
	list, err := p.disc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return fmt.Errorf("API discovery of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		switch r.Kind {
		case kindMachineDeployment, kindMachineSet, kindMachinePool, kindMachine:
			if !containsSlash(r.Name) {
				p.gvr[r.Kind] = gv.WithResource(r.Name)
			}
		}
	}
	for _, k := range []string{kindMachineDeployment, kindMachineSet, kindMachine} {
		if _, ok := p.gvr[k]; !ok {
			return fmt.Errorf("%s does not serve %s", gv, k)
		}
	}
	return nil
}

// Name returns "clusterapi".
func (p *Provider) Name() string { return ProviderName }

// NodeGroups returns the groups of the last Refresh, sorted by id.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []cloudprovider.NodeGroup{}
	for _, id := range p.snap.order {
		out = append(out, p.groups[id])
	}
	return out
}

// NodeGroupForNode finds the node's Machine (by providerID, else by the
// Node's machine annotations) and the group that owns it; a MachinePool
// node without a Machine is found in the pool's providerIDList.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.snap.groupOfNode(node, p.keys)
	if id == "" {
		return nil, nil
	}
	return p.groups[id], nil
}

// HasInstance tells whether the node's Machine (or MachinePool entry)
// still exists. Nodes Cluster API does not know are reported present: not
// ours to judge.
func (p *Provider) HasInstance(node *corev1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.snap.machineOfNode(node, p.keys); m != nil {
		return m.GetDeletionTimestamp() == nil, nil
	}
	if p.snap.groupOfNode(node, p.keys) != "" {
		return true, nil // a MachinePool entry
	}
	if node.Annotations[p.keys.nodeMachine] != "" {
		return false, nil // its Machine is gone
	}
	return true, nil
}

// Pricing is not offered: Cluster API knows no prices.
func (p *Provider) Pricing() (cloudprovider.PricingModel, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// GetResourceLimiter returns nil: the autoscaler's flags limit.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) { return nil, nil }

// Reservations is not offered by the provider: CapacityReservation
// objects apply to its groups, by group id or through the group's
// LabelCapacityReservation label (nodeGroup.CapacityReservation).
func (p *Provider) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// Refresh takes a new snapshot of the informers' caches. A scalable
// resource with bad annotations is left out (and logged, naming it); the
// others go on.
func (p *Provider) Refresh(ctx context.Context) error {
	snap, problems := p.takeSnapshot()
	bad := map[string]bool{}
	for _, pr := range problems {
		p.logger.Error(pr.err, "Cluster API scalable resource left out of autoscaling", "kind", pr.kind, "object", pr.ref)
		if pr.obj != nil {
			p.warn(pr.obj, ReasonInvalidNodeGroup, "Left out of autoscaling: "+pr.err.Error())
			bad[pr.kind+"/"+pr.ref] = true
		}
	}
	p.forgetWarnings(ReasonInvalidNodeGroup, bad)
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, st := range snap.groups {
		g := p.groups[id]
		if g == nil {
			g = &nodeGroup{p: p, id: id, kind: st.kind, namespace: st.obj.GetNamespace(), name: st.obj.GetName(), gvr: p.gvr[st.kind]}
			p.groups[id] = g
		}
		g.state = st
		g.settleLocked()
	}
	for id, g := range p.groups {
		if snap.groups[id] == nil {
			g.state = nil // deleted, or no longer autoscaled
		}
	}
	p.snap = snap
	return ctx.Err()
}

// Cleanup stops the informers and the provider's own event broadcaster:
// it is Close, since nothing on the management cluster needs telling.
func (p *Provider) Cleanup() error { return p.Close() }

// Close implements cloudprovider.Closer: the local part of Cleanup.
func (p *Provider) Close() error {
	select {
	case <-p.stop:
	default:
		close(p.stop)
		p.shutdownEvents()
	}
	return nil
}

func (p *Provider) shutdownEvents() {
	if p.broadcaster != nil {
		p.broadcaster.Shutdown()
	}
}

// infraLister returns a synced lister of an infrastructure template kind,
// starting its informer on first use. Only the first call waits (briefly)
// for it: a kind that cannot be listed (no RBAC, CRD gone) must not hold
// every pass; later calls just tell it has not synced.
func (p *Provider) infraLister(ctx context.Context, gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	p.infraMu.Lock()
	defer p.infraMu.Unlock()
	if l := p.infra[gvr]; l != nil {
		return l, nil
	}
	inf := p.factory.ForResource(gvr)
	if !p.infraStarted[gvr] {
		p.infraStarted[gvr] = true
		p.factory.Start(p.stop)
		ctx, cancel := context.WithTimeout(ctx, infraSyncWait)
		defer cancel()
		cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced)
	}
	if !inf.Informer().HasSynced() {
		return nil, fmt.Errorf("the %s informer has not synced (may we list it?)", gvr)
	}
	p.infra[gvr] = inf.Lister()
	return p.infra[gvr], nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsSlash(s string) bool {
	for _, c := range s {
		if c == '/' {
			return true
		}
	}
	return false
}

// Event reasons.
const (
	ReasonInvalidNodeGroup        = "InvalidNodeGroup"
	ReasonInvalidTemplate         = "InvalidNodeTemplate"
	ReasonInvalidReservationLabel = "InvalidCapacityReservationLabel"
)

// warn records a Warning on obj unless the same one was the last
// recorded for it.
func (p *Provider) warn(obj *unstructured.Unstructured, reason, msg string) {
	if p.events == nil {
		return
	}
	key := reason + "|" + obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
	p.warnedMu.Lock()
	same := p.warned[key] == msg
	p.warned[key] = msg
	p.warnedMu.Unlock()
	if !same {
		p.events.Event(obj, corev1.EventTypeWarning, reason, msg)
	}
}

// forgetWarnings drops the remembered warnings of reason whose object is
// not in still (fixed, or gone), so that a problem coming back is told
// again.
func (p *Provider) forgetWarnings(reason string, still map[string]bool) {
	p.warnedMu.Lock()
	defer p.warnedMu.Unlock()
	for key := range p.warned {
		r, obj, _ := strings.Cut(key, "|")
		if r == reason && !still[obj] {
			delete(p.warned, key)
		}
	}
}

func (p *Provider) forgetWarning(reason string, obj *unstructured.Unstructured) {
	p.warnedMu.Lock()
	defer p.warnedMu.Unlock()
	delete(p.warned, reason+"|"+obj.GetKind()+"/"+obj.GetNamespace()+"/"+obj.GetName())
}

// infraSyncWait bounds the first wait for an infrastructure template
// informer.
var infraSyncWait = 5 * time.Second

func envVersion() string { return os.Getenv("CAPI_VERSION") }
