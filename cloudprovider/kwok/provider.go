// Package kwok is a cloud provider for demos and tests. Its node groups come
// from a config file; growing a group creates real Node objects in the API
// server (annotated for the kwok controller, which keeps them Ready and their
// pods Running) and, after a configurable delay, the ResourceSlices the
// node's DRA drivers would publish. Faults (quota exhausted, nodes that never
// register, slow boots) and capacity reservations are declared in the same
// file, so that the rest of the autoscaler can be tested against them.
//
// State lives in memory and in the API server: every group's instances are
// recorded in a ConfigMap (kwok-provider-<group> in stateNamespace), and a
// restarted provider restores them on Refresh, instances still booting
// included (they go on booting from their original creation time), as a
// real cloud would still have them; nodes are also found by their
// node-group label. docs/kwok-faults.md describes the faults.
package kwok

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

var (
	_ cloudprovider.CloudProvider = &Provider{}
	_ cloudprovider.Closer        = &Provider{}
)

// Provider is the kwok cloud provider.
type Provider struct {
	client kubernetes.Interface
	clock  clock.Clock
	logger klog.Logger
	// ctx is cancelled by Cleanup; every goroutine and API call derives
	// from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	groups       []*nodeGroup
	reservations []ReservationConfig

	// mu guards the instances of every group, seq and closed: the
	// autoscaler loop calls in from one goroutine, but boot goroutines
	// register their nodes concurrently.
	mu sync.Mutex
	// seq counts registrations, so that Refresh can tell a node that
	// registered after its List from one that was deleted.
	seq    uint64
	closed bool

	// stateMu serializes reads and writes of the state ConfigMaps, so
	// that an older snapshot of a group never overwrites a newer one.
	// Never taken with mu held.
	stateMu        sync.Mutex
	stateNamespace string

	// watch is what Refresh reads the nodes from; only Refresh (the
	// loop's goroutine) touches it.
	watch *nodeWatch
}

// ProviderOption configures a Provider.
type ProviderOption func(*Provider)

// WithClock sets the clock that times boot and driver delays (a fake one
// in tests).
func WithClock(c clock.Clock) ProviderOption {
	return func(p *Provider) { p.clock = c }
}

// WithLogger sets the logger.
func WithLogger(l klog.Logger) ProviderOption {
	return func(p *Provider) { p.logger = l }
}

// New validates cfg and returns a provider that creates nodes through
// client. It makes no API call: the autoscaler's first Refresh finds the
// nodes that already exist.
func New(client kubernetes.Interface, cfg *Config, opts ...ProviderOption) (*Provider, error) {
	if client == nil {
		return nil, fmt.Errorf("kwok provider: a Kubernetes client is required")
	}
	if cfg == nil {
		return nil, fmt.Errorf("kwok provider: a config is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kwok provider: %w", err)
	}
	p := &Provider{
		client: client,
		clock:  clock.RealClock{},
		logger: klog.Background().WithName("kwok-provider"),

		stateNamespace: cfg.StateNamespace,
	}
	if p.stateNamespace == "" {
		p.stateNamespace = DefaultStateNamespace
	}
	for _, o := range opts {
		o(p)
	}
	p.ctx, p.cancel = context.WithCancel(klog.NewContext(context.Background(), p.logger))
	p.watch = startNodeWatch(p)
	for _, g := range cfg.NodeGroups {
		p.groups = append(p.groups, &nodeGroup{
			p: p, cfg: *deepCopyGroup(&g), instances: map[string]*instance{},
			rand:    newGroupRand(g.Faults.Seed, g.Name),
			pending: map[string]instanceRecord{}, forgotten: sets.New[string](),
		})
	}
	for _, r := range cfg.Reservations {
		r.NodeGroups = append([]string(nil), r.NodeGroups...)
		r.Start, r.End, r.Price = r.Start.DeepCopy(), r.End.DeepCopy(), copyPtr(r.Price)
		p.reservations = append(p.reservations, r)
	}
	return p, nil
}

// Name returns "kwok".
func (p *Provider) Name() string { return ProviderName }

// NodeGroups returns the groups in config order.
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	out := make([]cloudprovider.NodeGroup, 0, len(p.groups))
	for _, g := range p.groups {
		out = append(out, g)
	}
	return out
}

// NodeGroupForNode maps a node to its group by the node-group label, or by
// its providerID when the label is missing.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	if g := p.groupOf(node); g != nil {
		return g, nil
	}
	return nil, nil
}

// HasInstance tells whether a node of a kwok group still has its instance.
// Nodes of no kwok group are not this provider's to judge; they are
// reported as present so that nothing treats them as deleted.
func (p *Provider) HasInstance(node *corev1.Node) (bool, error) {
	g := p.groupOf(node)
	if g == nil {
		return true, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := g.instances[instanceName(node)]
	return ok, nil
}

// GetResourceLimiter returns nil: kwok imposes no limits of its own; the
// autoscaler's flags do.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return nil, nil
}

// Cleanup stops every boot goroutine and waits for them. Nodes stay; a
// new provider adopts them on Refresh. It is Close: kwok's "cloud" is the
// API server, which has nothing to be told.
func (p *Provider) Cleanup() error { return p.Close() }

// Close implements cloudprovider.Closer: the local part of Cleanup.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.watch.stop()
	return nil
}

// group returns the group named name, or nil.
func (p *Provider) group(name string) *nodeGroup {
	for _, g := range p.groups {
		if g.cfg.Name == name {
			return g
		}
	}
	return nil
}

// groupOf finds a node's group: by label, else by providerID, else (for
// the placeholder nodes upstream-style callers build for instances that
// never registered) by a node name that is itself a providerID.
func (p *Provider) groupOf(node *corev1.Node) *nodeGroup {
	if node == nil {
		return nil
	}
	if name, ok := node.Labels[LabelNodeGroup]; ok {
		return p.group(name)
	}
	for _, id := range []string{node.Spec.ProviderID, node.Name} {
		if group, _, ok := parseProviderID(id); ok {
			return p.group(group)
		}
	}
	return nil
}

// instanceName is the instance a node stands for: the name in its
// providerID when it has one, else its own name.
func instanceName(node *corev1.Node) string {
	for _, id := range []string{node.Spec.ProviderID, node.Name} {
		if _, name, ok := parseProviderID(id); ok {
			return name
		}
	}
	return node.Name
}

// deepCopyGroup copies a group config so that the caller's later changes
// never reach the provider.
func deepCopyGroup(g *NodeGroupConfig) *NodeGroupConfig {
	out := *g
	out.Price = copyPtr(g.Price)
	out.Template.Labels = copyMap(g.Template.Labels)
	out.Template.Annotations = copyMap(g.Template.Annotations)
	out.Topology = copyMap(g.Topology)
	out.PerRequestTopology = slices.Clone(g.PerRequestTopology)
	out.Template.Capacity = g.Template.Capacity.DeepCopy()
	out.Template.Taints = nil
	for _, t := range g.Template.Taints {
		out.Template.Taints = append(out.Template.Taints, *t.DeepCopy())
	}
	out.Template.Drivers = nil
	for _, d := range g.Template.Drivers {
		c := DriverConfig{Driver: d.Driver}
		for _, cs := range d.SharedCounters {
			c.SharedCounters = append(c.SharedCounters, *cs.DeepCopy())
		}
		for _, dev := range d.Devices {
			c.Devices = append(c.Devices, *dev.DeepCopy())
		}
		out.Template.Drivers = append(out.Template.Drivers, c)
	}
	out.Faults.OutOfResourcesAfter = copyPtr(g.Faults.OutOfResourcesAfter)
	out.Faults.NeverRegisterAfter = copyPtr(g.Faults.NeverRegisterAfter)
	out.Faults.NeverReadyAfter = copyPtr(g.Faults.NeverReadyAfter)
	return &out
}

func copyPtr[T any](v *T) *T {
	if v == nil {
		return nil
	}
	return ptr.To(*v)
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
