package externalgrpc

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/server"
)

// fakeCP is an in-memory cloudprovider.CloudProvider for the server side
// of the tests: a group's instances are "fake://<group>/<n>".
type fakeCP struct {
	groups       []*fakeGroup
	reservations []cloudprovider.ReservedCapacity
	reservErr    error
	refreshErr   error
	// ghosts are groups NodeGroupForNode answers (by the node's "group"
	// label) but NodeGroups does not list.
	ghosts []*fakeGroup
}

type fakeGroup struct {
	cp        *fakeCP
	id        string
	min, max  int
	instances []cloudprovider.Instance
	template  *cloudprovider.NodeTemplate
	options   *cloudprovider.NodeGroupAutoscalingOptions
	// target, when set, is TargetSize's answer instead of the instances.
	target *int
	// err fails a method by name.
	err   map[string]error
	calls []string
}

func (c *fakeCP) add(id string, min, max int) *fakeGroup {
	g := &fakeGroup{cp: c, id: id, min: min, max: max, err: map[string]error{}}
	c.groups = append(c.groups, g)
	return g
}

func (c *fakeCP) Name() string { return "fake" }
func (c *fakeCP) NodeGroups() []cloudprovider.NodeGroup {
	out := []cloudprovider.NodeGroup{}
	for _, g := range c.groups {
		out = append(out, g)
	}
	return out
}
func (c *fakeCP) NodeGroupForNode(n *corev1.Node) (cloudprovider.NodeGroup, error) {
	for _, g := range append(c.groups, c.ghosts...) {
		if n.Labels["group"] == g.id {
			return g, nil
		}
		for _, i := range g.instances {
			if i.Id == n.Spec.ProviderID {
				return g, nil
			}
		}
	}
	return nil, nil
}
func (c *fakeCP) HasInstance(*corev1.Node) (bool, error) { return true, nil }
func (c *fakeCP) Pricing() (cloudprovider.PricingModel, error) {
	return nil, cloudprovider.ErrNotImplemented
}
func (c *fakeCP) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) { return nil, nil }
func (c *fakeCP) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	return c.reservations, c.reservErr
}
func (c *fakeCP) Refresh(context.Context) error { return c.refreshErr }
func (c *fakeCP) Cleanup() error                { return nil }

func (g *fakeGroup) Id() string    { return g.id }
func (g *fakeGroup) MinSize() int  { return g.min }
func (g *fakeGroup) MaxSize() int  { return g.max }
func (g *fakeGroup) Debug() string { return "fake " + g.id }
func (g *fakeGroup) call(m string) error {
	g.calls = append(g.calls, m)
	return g.err[m]
}
func (g *fakeGroup) TargetSize() (int, error) {
	if g.target != nil {
		return *g.target, g.call("TargetSize")
	}
	return len(g.instances), g.call("TargetSize")
}
func (g *fakeGroup) grow(m string, delta int) ([]string, error) {
	if err := g.call(m); err != nil {
		return nil, err
	}
	if len(g.instances)+delta > g.max {
		return nil, fmt.Errorf("node group %s: %d more would exceed max %d", g.id, delta, g.max)
	}
	var ids []string
	for i := 0; i < delta; i++ {
		id := fmt.Sprintf("fake://%s/%d", g.id, len(g.instances))
		g.instances = append(g.instances, cloudprovider.Instance{Id: id, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating},
			CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
		ids = append(ids, id)
	}
	return ids, nil
}
func (g *fakeGroup) IncreaseSize(_ context.Context, d int) ([]string, error) {
	return g.grow("IncreaseSize", d)
}
func (g *fakeGroup) AtomicIncreaseSize(_ context.Context, d int) ([]string, error) {
	return g.grow("AtomicIncreaseSize", d)
}
func (g *fakeGroup) remove(m string, nodes []*corev1.Node, force bool) error {
	if err := g.call(m); err != nil {
		return err
	}
	if !force && len(g.instances)-len(nodes) < g.min {
		return fmt.Errorf("node group %s: below min %d", g.id, g.min)
	}
	for _, n := range nodes {
		for i, inst := range g.instances {
			if inst.Id == n.Spec.ProviderID {
				g.instances = append(g.instances[:i], g.instances[i+1:]...)
				break
			}
		}
	}
	return nil
}
func (g *fakeGroup) DeleteNodes(_ context.Context, n []*corev1.Node) error {
	return g.remove("DeleteNodes", n, false)
}
func (g *fakeGroup) ForceDeleteNodes(_ context.Context, n []*corev1.Node) error {
	return g.remove("ForceDeleteNodes", n, true)
}
func (g *fakeGroup) DecreaseTargetSize(_ context.Context, d int) error {
	return g.call("DecreaseTargetSize")
}
func (g *fakeGroup) Nodes() ([]cloudprovider.Instance, error) { return g.instances, g.call("Nodes") }
func (g *fakeGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	if err := g.call("TemplateNodeInfo"); err != nil {
		return nil, err
	}
	if g.template == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return g.template.DeepCopy(), nil
}
func (g *fakeGroup) GetOptions(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	if g.options == nil {
		return nil, cloudprovider.ErrNotImplemented
	}
	return g.options, nil
}

// faults is a server interceptor: it fails or delays RPCs by full method
// name, and counts the calls that reach it.
type faults struct {
	mu    sync.Mutex
	fail  map[string][]error // consumed one per call; the last one sticks
	delay map[string]time.Duration
	count map[string]int
}

func newFaults() *faults {
	return &faults{fail: map[string][]error{}, delay: map[string]time.Duration{}, count: map[string]int{}}
}

func (f *faults) set(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[method] = errs
}

func (f *faults) setDelay(method string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay[method] = d
}

func (f *faults) calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count[method]
}

func (f *faults) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	f.mu.Lock()
	m := shortMethod(info.FullMethod)
	f.count[m]++
	d := f.delay[m]
	var err error
	if errs := f.fail[m]; len(errs) > 0 {
		err = errs[0]
		if len(errs) > 1 {
			f.fail[m] = errs[1:]
		}
	}
	f.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// shortMethod is "Ext/RPC" for the extension and "RPC" for upstream's.
func shortMethod(full string) string {
	const extPrefix = "/draautoscaler.cloudprovider.v1.CloudProviderExtension/"
	const upPrefix = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/"
	if len(full) > len(extPrefix) && full[:len(extPrefix)] == extPrefix {
		return "Ext/" + full[len(extPrefix):]
	}
	return full[len(upPrefix):]
}

type env struct {
	cp     *fakeCP
	faults *faults
	p      *Provider
}

// start serves cp over bufconn (with the extension unless upstreamOnly)
// and returns a client provider for it.
func start(t testing.TB, cp *fakeCP, cfg Config, sopts ...server.ServeOption) *env {
	return startWith(t, cp, cfg, nil, sopts...)
}

// startWith is start with provider options.
func startWith(t testing.TB, cp *fakeCP, cfg Config, popts []ProviderOption, sopts ...server.ServeOption) *env {
	t.Helper()
	f := newFaults()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer(grpc.UnaryInterceptor(f.intercept))
	server.New(cp, sopts...).Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	if cfg.Address == "" {
		cfg.Address = "bufnet:1"
	}
	if cfg.GRPCTimeout.Duration == 0 {
		cfg.GRPCTimeout = metav1.Duration{Duration: 2 * time.Second}
	}
	// bufconn is in memory: plaintext, said so as a real config must.
	cfg.Insecure = cfg.CACert == ""
	p, err := New(&cfg, append(popts, WithDialOptions(
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() })))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.conn.Close() })
	return &env{cp: cp, faults: f, p: p}
}

func (e *env) refresh(t *testing.T) {
	t.Helper()
	if err := e.p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (e *env) group(t *testing.T, id string) cloudprovider.NodeGroup {
	t.Helper()
	for _, g := range e.p.NodeGroups() {
		if g.Id() == id {
			return g
		}
	}
	t.Fatalf("no node group %s after Refresh", id)
	return nil
}
