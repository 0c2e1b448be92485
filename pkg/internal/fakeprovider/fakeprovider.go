// Package fakeprovider is an in-memory cloudprovider.CloudProvider for unit
// tests: groups with a settable target size and instances (with states and
// creation errors), every mutating call recorded, and any method made to
// fail on demand.
package fakeprovider

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// GroupLabel on a Node names its group, for nodes whose providerID is not
// one of a group's instances.
const GroupLabel = "fakeprovider.dra-autoscaler.io/node-group"

// Call is one recorded mutating call on a group.
type Call struct {
	Method string // "IncreaseSize", "AtomicIncreaseSize", "DeleteNodes", "ForceDeleteNodes", "DecreaseTargetSize"
	Delta  int
	// Nodes are the providerIDs given to DeleteNodes / ForceDeleteNodes.
	Nodes []string
}

// FakeNodeGroup is a fake node group. IncreaseSize adds instances in state
// InstanceCreating with providerIDs "fake://<id>/<n>"; deleting instances
// lowers the target by the number deleted.
type FakeNodeGroup struct {
	mu          sync.Mutex
	id          string
	min, max    int
	target      int
	next        int
	instances   []cloudprovider.Instance
	template    *cloudprovider.NodeTemplate
	templateErr error
	options     func(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error)
	errs        map[string]error
	panics      map[string]string
	partial     int
	hideCreated bool
	calls       []Call
}

var _ cloudprovider.NodeGroup = &FakeNodeGroup{}

// NewGroup returns an empty group (target 0, no instances, no template).
func NewGroup(id string, min, max int) *FakeNodeGroup {
	return &FakeNodeGroup{id: id, min: min, max: max, errs: map[string]error{}}
}

// WithTemplate sets what TemplateNodeInfo returns (a copy of tmpl, or err).
func (g *FakeNodeGroup) WithTemplate(tmpl *cloudprovider.NodeTemplate, err error) *FakeNodeGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.template, g.templateErr = tmpl, err
	return g
}

// SetTarget sets the target size without touching the instances.
func (g *FakeNodeGroup) SetTarget(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.target = n
}

// AddInstance adds an instance with the given state and creation error
// (nil for none) and returns its providerID. The target is not changed.
func (g *FakeNodeGroup) AddInstance(state cloudprovider.InstanceState, errInfo *cloudprovider.InstanceErrorInfo) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addInstance(state, errInfo)
}

func (g *FakeNodeGroup) addInstance(state cloudprovider.InstanceState, errInfo *cloudprovider.InstanceErrorInfo) string {
	id := fmt.Sprintf("fake://%s/%d", g.id, g.next)
	g.next++
	g.instances = append(g.instances, cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: state, ErrorInfo: errInfo}})
	return id
}

// Fail makes method (e.g. "IncreaseSize", "TargetSize", "Nodes") return
// err from now on; a nil err clears it.
func (g *FakeNodeGroup) Fail(method string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		delete(g.errs, method)
		return
	}
	g.errs[method] = err
}

// FailIncrease makes IncreaseSize and AtomicIncreaseSize fail with err
// after adding added nodes (a partial success; AtomicIncreaseSize ignores
// added, as its contract demands).
func (g *FakeNodeGroup) FailIncrease(err error, added int) {
	g.Fail("IncreaseSize", err)
	g.Fail("AtomicIncreaseSize", err)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.partial = added
}

// Calls returns the mutating calls so far, in order.
func (g *FakeNodeGroup) Calls() []Call {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Call(nil), g.calls...)
}

// Target returns the target size without recording anything.
func (g *FakeNodeGroup) Target() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.target
}

func (g *FakeNodeGroup) Id() string   { return g.id }
func (g *FakeNodeGroup) MinSize() int { return g.min }
func (g *FakeNodeGroup) MaxSize() int { return g.max }
func (g *FakeNodeGroup) Debug() string {
	return fmt.Sprintf("fake group %s (%d..%d)", g.id, g.min, g.max)
}
func (g *FakeNodeGroup) String() string { return g.Debug() }
func (g *FakeNodeGroup) err(m string) error {
	if msg, ok := g.panics[m]; ok {
		delete(g.panics, m)
		g.mu.Unlock() // the caller's deferred Unlock must find it locked
		defer g.mu.Lock()
		panic(msg)
	}
	return g.errs[m]
}

// PanicOnce makes the next call of method panic with msg, as a provider's
// bug would.
func (g *FakeNodeGroup) PanicOnce(method, msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.panics == nil {
		g.panics = map[string]string{}
	}
	g.panics[method] = msg
}

func (g *FakeNodeGroup) TargetSize() (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.err("TargetSize"); err != nil {
		return 0, err
	}
	return g.target, nil
}

func (g *FakeNodeGroup) IncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return g.increase(ctx, "IncreaseSize", delta, false)
}

func (g *FakeNodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return g.increase(ctx, "AtomicIncreaseSize", delta, true)
}

// increase adds instances and returns their ids, unless HideCreated was
// set (a provider whose instances appear only later).
func (g *FakeNodeGroup) increase(ctx context.Context, method string, delta int, atomic bool) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, Call{Method: method, Delta: delta})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if delta <= 0 {
		return nil, fmt.Errorf("%s: delta %d must be positive", method, delta)
	}
	if g.target+delta > g.max {
		return nil, fmt.Errorf("%s: %d+%d exceeds max %d", method, g.target, delta, g.max)
	}
	add := delta
	err := g.err(method)
	if err != nil {
		add = 0
		if !atomic {
			add = min(g.partial, delta)
		}
	}
	var created []string
	for range add {
		created = append(created, g.addInstance(cloudprovider.InstanceCreating, nil))
	}
	g.target += add
	if g.hideCreated {
		created = nil
	}
	return created, err
}

// HideCreated makes IncreaseSize return no instance ids, like a provider
// whose instances a controller creates after the call.
func (g *FakeNodeGroup) HideCreated() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hideCreated = true
}

// SetCreatedAt sets when the instance id was created (Instance.CreatedAt).
func (g *FakeNodeGroup) SetCreatedAt(id string, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range g.instances {
		if g.instances[i].Id == id {
			g.instances[i].CreatedAt = at
		}
	}
}

func (g *FakeNodeGroup) DeleteNodes(_ context.Context, nodes []*corev1.Node) error {
	return g.delete("DeleteNodes", nodes, false)
}

func (g *FakeNodeGroup) ForceDeleteNodes(_ context.Context, nodes []*corev1.Node) error {
	return g.delete("ForceDeleteNodes", nodes, true)
}

func (g *FakeNodeGroup) delete(method string, nodes []*corev1.Node, force bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	call := Call{Method: method}
	gone := map[string]bool{}
	for _, n := range nodes {
		call.Nodes = append(call.Nodes, n.Spec.ProviderID)
		gone[n.Spec.ProviderID] = true
	}
	g.calls = append(g.calls, call)
	if err := g.err(method); err != nil {
		return err
	}
	var keep []cloudprovider.Instance
	for _, in := range g.instances {
		if !gone[in.Id] {
			keep = append(keep, in)
		}
	}
	removed := len(g.instances) - len(keep)
	if !force && g.target-removed < g.min {
		return fmt.Errorf("%s: would go below min size %d", method, g.min)
	}
	g.instances = keep
	g.target = max(g.target-removed, 0)
	return nil
}

func (g *FakeNodeGroup) DecreaseTargetSize(_ context.Context, delta int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, Call{Method: "DecreaseTargetSize", Delta: delta})
	if err := g.err("DecreaseTargetSize"); err != nil {
		return err
	}
	if delta >= 0 {
		return fmt.Errorf("DecreaseTargetSize: delta %d must be negative", delta)
	}
	g.target = max(g.target+delta, 0)
	return nil
}

func (g *FakeNodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.err("Nodes"); err != nil {
		return nil, err
	}
	out := make([]cloudprovider.Instance, len(g.instances))
	for i, in := range g.instances {
		out[i] = in
		if in.Status != nil {
			st := *in.Status
			out[i].Status = &st
		}
	}
	return out, nil
}

func (g *FakeNodeGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.err("TemplateNodeInfo"); err != nil {
		return nil, err
	}
	if g.templateErr != nil {
		return nil, g.templateErr
	}
	if g.template == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return g.template.DeepCopy(), nil
}

func (g *FakeNodeGroup) GetOptions(defaults cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	g.mu.Lock()
	fn := g.options
	g.mu.Unlock()
	if fn == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return fn(defaults)
}

// WithOptions sets what GetOptions answers, given the defaults.
func (g *FakeNodeGroup) WithOptions(fn func(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error)) *FakeNodeGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.options = fn
	return g
}

// Provider is a fake cloud provider over a fixed list of groups. A node
// belongs to the group that has an instance with its providerID or, failing
// that, the group its GroupLabel names.
type Provider struct {
	Groups []*FakeNodeGroup
	// Errors injected into NodeGroupForNode (by node name) and Refresh.
	NodeGroupForNodeErr map[string]error
	RefreshErr          error
	Limiter             *cloudprovider.ResourceLimiter
}

var _ cloudprovider.CloudProvider = &Provider{}

// New returns a provider over groups.
func New(groups ...*FakeNodeGroup) *Provider { return &Provider{Groups: groups} }

func (p *Provider) Name() string { return "fake" }

func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	out := make([]cloudprovider.NodeGroup, len(p.Groups))
	for i, g := range p.Groups {
		out[i] = g
	}
	return out
}

func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	if err := p.NodeGroupForNodeErr[node.Name]; err != nil {
		return nil, err
	}
	if id := node.Spec.ProviderID; id != "" {
		for _, g := range p.Groups {
			instances, _ := g.Nodes()
			for _, in := range instances {
				if in.Id == id {
					return g, nil
				}
			}
		}
	}
	for _, g := range p.Groups {
		if node.Labels[GroupLabel] == g.id {
			return g, nil
		}
	}
	return nil, nil
}

func (p *Provider) HasInstance(node *corev1.Node) (bool, error) {
	g, err := p.NodeGroupForNode(node)
	return g != nil && node.Spec.ProviderID != "", err
}

func (p *Provider) Pricing() (cloudprovider.PricingModel, error) {
	return nil, cloudprovider.ErrNotImplemented
}

func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return p.Limiter, nil
}

func (p *Provider) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	return nil, cloudprovider.ErrNotImplemented
}

func (p *Provider) Refresh(context.Context) error { return p.RefreshErr }

func (p *Provider) Cleanup() error { return nil }
