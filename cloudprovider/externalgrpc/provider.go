// Package externalgrpc is a cloud provider that talks to a gRPC server:
// upstream cluster autoscaler's externalgrpc protocol, unchanged (so a
// server written for upstream's autoscaler works as it is), plus
// dra-autoscaler's extension service, found per server through its
// GetCapabilities RPC: templates with ResourceSlices and pods, atomic
// increase, increase returning the created ids, force delete, instance
// creation times and reservations. docs/providers/externalgrpc.md
// describes both; package server serves any cloudprovider.CloudProvider.
//
// Each Refresh takes one snapshot of the server (capabilities, node
// groups, reservations): all calls must succeed or the Refresh fails and
// nothing is offered to scale. Reads are retried on UNAVAILABLE with
// backoff; mutations never are, since after a lost reply a retry could
// scale twice.
package externalgrpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/wire"
)

// ProviderName is the --cloud-provider value.
const ProviderName = "externalgrpc"

var (
	_ cloudprovider.CloudProvider = &Provider{}
	_ cloudprovider.Closer        = &Provider{}
)

// Provider is the externalgrpc cloud provider.
type Provider struct {
	cfg    *Config
	conn   *grpc.ClientConn
	cp     pb.CloudProviderClient
	ext    ext.CloudProviderExtensionClient
	logger klog.Logger
	// ctx bounds the calls of methods our interface gives no context;
	// Cleanup cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu  sync.RWMutex
	gen *generation
	// groups are every group ever listed, by id: the same object for the
	// provider's life, since the autoscaler keeps the ones it started with.
	groups map[string]*nodeGroup

	// events tells the server's bad answers (WithEvents).
	events *warner
}

// generation is what one Refresh learnt; every cache lives here, so a
// Refresh drops them all at once.
type generation struct {
	groups       []cloudprovider.NodeGroup
	byID         map[string]*groupInfo
	order        []string
	caps         map[ext.Capability]bool
	reservations []cloudprovider.ReservedCapacity

	mu        sync.Mutex
	forNode   map[string]string
	templates map[string]templateResult
}

type templateResult struct {
	t   *cloudprovider.NodeTemplate
	err error
}

// ProviderOption configures a Provider.
type ProviderOption func(*Provider, *[]grpc.DialOption)

// UserAgent is sent on every call, so a server's operator can tell the
// autoscaler's calls from explain's (ReadOnlyUserAgent).
const (
	UserAgent         = "dra-autoscaler"
	ReadOnlyUserAgent = "dra-autoscaler-readonly"
)

// WithDialOptions adds gRPC dial options (tests use a bufconn dialer).
func WithDialOptions(opts ...grpc.DialOption) ProviderOption {
	return func(_ *Provider, d *[]grpc.DialOption) { *d = append(*d, opts...) }
}

// WithLogger sets the logger.
func WithLogger(l klog.Logger) ProviderOption {
	return func(p *Provider, _ *[]grpc.DialOption) { p.logger = l }
}

// New returns a provider for cfg. It does not connect: the first Refresh
// does, so a server that is not up yet fails that pass only.
func New(cfg *Config, opts ...ProviderOption) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, logger: klog.Background().WithName(ProviderName), gen: &generation{}, groups: map[string]*nodeGroup{}, events: newWarner()}
	dial := []grpc.DialOption{grpc.WithDefaultServiceConfig(retryServiceConfig), grpc.WithUserAgent(UserAgent)}
	for _, o := range opts {
		o(p, &dial)
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	} else {
		// Only with insecure: true (Validate); said loudly once.
		p.logger.Error(nil, "Insecure connection to the externalgrpc server: plaintext, the server is not authenticated; "+
			"set cacert (and cert, key) in --cloud-config for TLS", "address", cfg.Address)
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	// passthrough: the address is dialled as written (host resolved at
	// connect time), as upstream's grpc.Dial did, not through DNS SRV.
	conn, err := grpc.NewClient("passthrough:///"+cfg.Address, dial...)
	if err != nil {
		return nil, fmt.Errorf("externalgrpc %s: %w", cfg.Address, err)
	}
	p.conn, p.cp, p.ext = conn, pb.NewCloudProviderClient(conn), ext.NewCloudProviderExtensionClient(conn)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// StartupTimeout bounds how long Connect waits for a first good Refresh.
var StartupTimeout = time.Minute

// Connect is New plus a first successful Refresh, retried while the server
// does not answer (for up to StartupTimeout): the autoscaler takes its
// node groups from the provider when it starts.
func Connect(cfg *Config, opts ...ProviderOption) (*Provider, error) {
	p, err := New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartupTimeout)
	defer cancel()
	for {
		err := p.Refresh(ctx)
		if err == nil {
			return p, nil
		}
		p.logger.Info("Waiting for the externalgrpc server", "address", cfg.Address, "err", err)
		select {
		case <-ctx.Done():
			_ = p.conn.Close()
			return nil, fmt.Errorf("no successful Refresh within %s: %w", StartupTimeout, err)
		case <-time.After(time.Second):
		}
	}
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return ProviderName }

// callCtx bounds one call by grpc_timeout and the caller's context (the
// provider's, which Cleanup cancels, for methods without one).
func (p *Provider) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.GRPCTimeout.Duration)
}

func (p *Provider) current() *generation {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gen
}

// Refresh asks the server to refresh, then reads its capabilities, node
// groups and reservations. Any failure leaves no groups at all, so the
// pass scales nothing on a half-answered Refresh.
func (p *Provider) Refresh(ctx context.Context) error {
	gen, err := p.refresh(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.gen = &generation{}
		return err
	}
	for id, info := range gen.byID {
		g := p.groups[id]
		if g == nil {
			g = &nodeGroup{p: p, id: id}
			p.groups[id] = g
		}
		g.last.Store(info)
	}
	for _, id := range gen.order {
		gen.groups = append(gen.groups, p.groups[id])
	}
	p.gen = gen
	return nil
}

func (p *Provider) refresh(ctx context.Context) (*generation, error) {
	cctx, cancel := p.callCtx(ctx)
	_, err := p.cp.Refresh(cctx, &pb.RefreshRequest{})
	cancel()
	if err != nil {
		return nil, p.wrap("Refresh", "", err)
	}
	gen := &generation{byID: map[string]*groupInfo{}, caps: map[ext.Capability]bool{},
		forNode: map[string]string{}, templates: map[string]templateResult{}}
	if p.cfg.Extension != ExtensionOff {
		cctx, cancel := p.callCtx(ctx)
		resp, err := p.ext.GetCapabilities(cctx, &ext.GetCapabilitiesRequest{ClientVersion: "dra-autoscaler"})
		cancel()
		switch err = p.wrap("GetCapabilities", "", err); {
		case isUnimplemented(err):
			// A server written for upstream: upstream semantics.
		case err != nil:
			return nil, err
		default:
			for _, c := range resp.GetCapabilities() {
				gen.caps[c] = true
			}
		}
	}
	cctx, cancel = p.callCtx(ctx)
	resp, err := p.cp.NodeGroups(cctx, &pb.NodeGroupsRequest{})
	cancel()
	if err != nil {
		return nil, p.wrap("NodeGroups", "", err)
	}
	p.takeGroups(gen, resp.GetNodeGroups())
	if gen.caps[ext.Capability_CAPABILITY_RESERVATIONS] {
		cctx, cancel := p.callCtx(ctx)
		resp, err := p.ext.Reservations(cctx, &ext.ReservationsRequest{})
		cancel()
		switch err = p.wrap("Reservations", "", err); {
		case isUnimplemented(err):
			// Offered but not implemented: absent for this pass.
			delete(gen.caps, ext.Capability_CAPABILITY_RESERVATIONS)
		case err != nil:
			return nil, err
		}
		if err == nil {
			p.takeReservations(gen, resp.GetReservations())
		}
	}
	p.logger.V(4).Info("Refreshed", "address", p.cfg.Address, "nodeGroups", len(gen.groups), "capabilities", len(gen.caps))
	return gen, nil
}

// NodeGroups implements cloudprovider.CloudProvider: the groups of the last
// successful Refresh (none after a failed one).
func (p *Provider) NodeGroups() []cloudprovider.NodeGroup {
	return append([]cloudprovider.NodeGroup(nil), p.current().groups...)
}

// NodeGroupForNode implements cloudprovider.CloudProvider. Answers are
// cached until the next Refresh, "not managed" ones too.
func (p *Provider) NodeGroupForNode(node *corev1.Node) (cloudprovider.NodeGroup, error) {
	gen := p.current()
	if gen.byID == nil {
		return nil, fmt.Errorf("externalgrpc %s: no successful Refresh yet", p.cfg.Address)
	}
	key := node.Name + "\x00" + node.Spec.ProviderID
	gen.mu.Lock()
	id, cached := gen.forNode[key]
	gen.mu.Unlock()
	if !cached {
		ctx, cancel := p.callCtx(p.ctx)
		resp, err := p.cp.NodeGroupForNode(ctx, &pb.NodeGroupForNodeRequest{Node: wire.Node(node)})
		cancel()
		if err != nil {
			return nil, p.wrap("NodeGroupForNode", "", err)
		}
		id = resp.GetNodeGroup().GetId()
		gen.mu.Lock()
		gen.forNode[key] = id
		gen.mu.Unlock()
	}
	if id == "" {
		return nil, nil
	}
	p.mu.RLock()
	g := p.groups[id]
	p.mu.RUnlock()
	if gen.byID[id] == nil || g == nil {
		// The message names no node: one event per unknown group, not
		// one per node of it.
		p.logger.Error(nil, "Server put a node in a group it did not list", "node", node.Name, "nodeGroup", id)
		p.badAnswer("NodeGroupForNode", id, ReasonUnknownNodeGroup,
			fmt.Sprintf("node group %q, answered for the cluster's nodes, is not one NodeGroups listed (validly); its nodes are treated as not managed", id))
		return nil, nil
	}
	return g, nil
}

// HasInstance implements cloudprovider.CloudProvider; neither protocol has
// the call.
func (p *Provider) HasInstance(*corev1.Node) (bool, error) {
	return true, cloudprovider.ErrNotImplemented
}

// Pricing implements cloudprovider.CloudProvider. The model's calls return
// ErrNotImplemented when the server does not price.
func (p *Provider) Pricing() (cloudprovider.PricingModel, error) {
	return pricing{p}, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider: the protocol
// carries no limits, so the flags' apply.
func (p *Provider) GetResourceLimiter() (*cloudprovider.ResourceLimiter, error) {
	return nil, nil
}

// Reservations implements cloudprovider.CloudProvider, from the last
// Refresh; ErrNotImplemented when the server has no reservations
// capability.
func (p *Provider) Reservations() ([]cloudprovider.ReservedCapacity, error) {
	gen := p.current()
	if !gen.caps[ext.Capability_CAPABILITY_RESERVATIONS] {
		return nil, cloudprovider.ErrNotImplemented
	}
	out := make([]cloudprovider.ReservedCapacity, 0, len(gen.reservations))
	for _, r := range gen.reservations {
		r.NodeGroups = append([]string(nil), r.NodeGroups...)
		out = append(out, r)
	}
	return out, nil
}

// Cleanup implements cloudprovider.CloudProvider: it tells the server,
// ends the calls in flight and closes the connection.
func (p *Provider) Cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.GRPCTimeout.Duration)
	_, err := p.cp.Cleanup(ctx, &pb.CleanupRequest{})
	cancel()
	return errors.Join(p.wrap("Cleanup", "", err), p.Close())
}

// Close implements cloudprovider.Closer: it ends the calls in flight and
// closes the connection, telling the server nothing (upstream's example
// server tears its provider down on Cleanup).
func (p *Provider) Close() error {
	p.cancel()
	return p.conn.Close()
}

// InsecureReason says why the connection is not secure, "" when it is
// (Config.InsecureReason), for the status.
func (p *Provider) InsecureReason() string { return p.cfg.InsecureReason() }

type pricing struct{ p *Provider }

func (m pricing) NodePrice(node *corev1.Node, start, end time.Time) (float64, error) {
	ctx, cancel := m.p.callCtx(m.p.ctx)
	defer cancel()
	req := &pb.PricingNodePriceRequest{Node: wire.Node(node), StartTimestamp: wire.Timestamp(start), EndTimestamp: wire.Timestamp(end)}
	wire.AddLegacyPricing(req, start, end)
	resp, err := m.p.cp.PricingNodePrice(ctx, req)
	if err != nil {
		return 0, m.p.wrap("PricingNodePrice", "", err)
	}
	return resp.GetPrice(), nil
}

func (m pricing) PodPrice(pod *corev1.Pod, start, end time.Time) (float64, error) {
	b, err := pod.Marshal()
	if err != nil {
		return 0, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctx, cancel := m.p.callCtx(m.p.ctx)
	defer cancel()
	req := &pb.PricingPodPriceRequest{PodBytes: b, StartTimestamp: wire.Timestamp(start), EndTimestamp: wire.Timestamp(end)}
	wire.AddLegacyPricing(req, start, end)
	resp, err := m.p.cp.PricingPodPrice(ctx, req)
	if err != nil {
		return 0, m.p.wrap("PricingPodPrice", "", err)
	}
	return resp.GetPrice(), nil
}

// retryServiceConfig retries the reads (readRPCs), and only them, on
// UNAVAILABLE (a server restarting, a connection lost) with exponential
// backoff. The mutating RPCs are not listed: a retry after a lost reply
// could scale twice.
var retryServiceConfig = retryConfig(readRPCs)

func retryConfig(methods []string) string {
	names := make([]string, len(methods))
	for i, m := range methods {
		service, method, _ := strings.Cut(strings.TrimPrefix(m, "/"), "/")
		names[i] = fmt.Sprintf(`{"service":%q,"method":%q}`, service, method)
	}
	return `{"methodConfig":[{"name":[` + strings.Join(names, ",") +
		`],"retryPolicy":{"maxAttempts":4,"initialBackoff":"0.1s","maxBackoff":"1s","backoffMultiplier":2,` +
		`"retryableStatusCodes":["UNAVAILABLE"]}}]}`
}
