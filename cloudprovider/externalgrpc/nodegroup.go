package externalgrpc

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"google.golang.org/grpc"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/wire"
)

var _ cloudprovider.NodeGroup = &nodeGroup{}

// nodeGroup is one group of the server. The object lives as long as the
// provider (the autoscaler holds the groups it was started with); its
// sizes and the server's capabilities are read from the latest Refresh.
type nodeGroup struct {
	p  *Provider
	id string
	// last is what the latest Refresh that listed the group said.
	last atomic.Pointer[groupInfo]
}

type groupInfo struct {
	min, max int
	debug    string
}

func (g *nodeGroup) Id() string                { return g.id }
func (g *nodeGroup) MinSize() int              { return g.last.Load().min }
func (g *nodeGroup) MaxSize() int              { return g.last.Load().max }
func (g *nodeGroup) Debug() string             { return g.last.Load().debug }
func (g *nodeGroup) gen() *generation          { return g.p.current() }
func (g *nodeGroup) has(c ext.Capability) bool { return g.gen().caps[c] }

// served tells whether the latest Refresh listed the group: one the
// server no longer lists is not asked about (its calls fail clearly).
func (g *nodeGroup) served() error {
	if g.gen().byID[g.id] == nil {
		return fmt.Errorf("externalgrpc %s node group %s: not listed by the server's last NodeGroups (or no successful Refresh)", g.p.cfg.Address, g.id)
	}
	return nil
}

// TargetSize is read from the server every time (never cached): the loop
// reads it before and after an increase.
func (g *nodeGroup) TargetSize() (int, error) {
	if err := g.served(); err != nil {
		return 0, err
	}
	ctx, cancel := g.p.callCtx(g.p.ctx)
	defer cancel()
	resp, err := g.p.cp.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: g.id})
	if err != nil {
		return 0, g.p.wrap("NodeGroupTargetSize", g.id, err)
	}
	if n := resp.GetTargetSize(); n < 0 {
		g.p.badAnswer("NodeGroupTargetSize", g.id, ReasonInvalidNodeGroup,
			fmt.Sprintf("node group %q: negative target size %d; the group is left out of the pass", g.id, n))
		return 0, fmt.Errorf("externalgrpc %s NodeGroupTargetSize node group %s: negative target size %d: %w", g.p.cfg.Address, g.id, n, cloudprovider.ErrInvalidAnswer)
	}
	g.p.events.forget("NodeGroupTargetSize", g.id)
	return int(resp.GetTargetSize()), nil
}

// IncreaseSize implements cloudprovider.NodeGroup. Through upstream's RPC
// the created ids are unknown (none are returned).
func (g *nodeGroup) IncreaseSize(ctx context.Context, delta int) ([]string, error) {
	if delta <= 0 {
		return nil, fmt.Errorf("node group %s: increase by %d: delta must be positive", g.id, delta)
	}
	if err := g.served(); err != nil {
		return nil, err
	}
	if g.has(ext.Capability_CAPABILITY_INCREASE_SIZE_IDS) {
		ids, err := g.extIncrease(ctx, "NodeGroupIncreaseSize", g.p.ext.NodeGroupIncreaseSize, delta)
		// UNIMPLEMENTED means the server did nothing: upstream's call is safe.
		if !isUnimplemented(err) {
			return ids, err
		}
	}
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	_, err := g.p.cp.NodeGroupIncreaseSize(cctx, &pb.NodeGroupIncreaseSizeRequest{Id: g.id, Delta: int32(delta)})
	return nil, g.p.wrap("NodeGroupIncreaseSize", g.id, err)
}

// AtomicIncreaseSize implements cloudprovider.NodeGroup; without the
// extension it is ErrNotImplemented, never a silent non-atomic increase.
func (g *nodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) ([]string, error) {
	if delta <= 0 {
		return nil, fmt.Errorf("node group %s: increase by %d: delta must be positive", g.id, delta)
	}
	if err := g.served(); err != nil {
		return nil, err
	}
	if !g.has(ext.Capability_CAPABILITY_ATOMIC_INCREASE_SIZE) {
		return nil, fmt.Errorf("externalgrpc %s node group %s: atomic increase: %w", g.p.cfg.Address, g.id, cloudprovider.ErrNotImplemented)
	}
	return g.extIncrease(ctx, "NodeGroupAtomicIncreaseSize", g.p.ext.NodeGroupAtomicIncreaseSize, delta)
}

type increaseFunc func(context.Context, *ext.NodeGroupIncreaseRequest, ...grpc.CallOption) (*ext.NodeGroupIncreaseResponse, error)

func (g *nodeGroup) extIncrease(ctx context.Context, rpc string, call increaseFunc, delta int) ([]string, error) {
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	resp, err := call(cctx, &ext.NodeGroupIncreaseRequest{Id: g.id, Delta: int32(delta)})
	if err != nil {
		return nil, g.p.wrap(rpc, g.id, err)
	}
	return resp.GetCreatedIds(), nil
}

// DeleteNodes implements cloudprovider.NodeGroup.
func (g *nodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	_, err := g.p.cp.NodeGroupDeleteNodes(cctx, &pb.NodeGroupDeleteNodesRequest{Id: g.id, Nodes: wire.Nodes(nodes)})
	return g.p.wrap("NodeGroupDeleteNodes", g.id, err)
}

// ForceDeleteNodes implements cloudprovider.NodeGroup; without the
// extension it is upstream's DeleteNodes (which the server may refuse
// below the minimum size).
func (g *nodeGroup) ForceDeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	if g.has(ext.Capability_CAPABILITY_FORCE_DELETE_NODES) {
		cctx, cancel := g.p.callCtx(ctx)
		_, err := g.p.ext.NodeGroupForceDeleteNodes(cctx, &ext.NodeGroupForceDeleteNodesRequest{Id: g.id, Nodes: wire.Nodes(nodes)})
		cancel()
		if err = g.p.wrap("NodeGroupForceDeleteNodes", g.id, err); !isUnimplemented(err) {
			return err
		}
	}
	return g.DeleteNodes(ctx, nodes)
}

// DecreaseTargetSize implements cloudprovider.NodeGroup.
func (g *nodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: decrease target by %d: delta must be negative", g.id, delta)
	}
	cctx, cancel := g.p.callCtx(ctx)
	defer cancel()
	_, err := g.p.cp.NodeGroupDecreaseTargetSize(cctx, &pb.NodeGroupDecreaseTargetSizeRequest{Id: g.id, Delta: int32(delta)})
	return g.p.wrap("NodeGroupDecreaseTargetSize", g.id, err)
}

// Nodes implements cloudprovider.NodeGroup; creation times come with the
// extension only.
func (g *nodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	if err := g.served(); err != nil {
		return nil, err
	}
	ctx, cancel := g.p.callCtx(g.p.ctx)
	defer cancel()
	if g.has(ext.Capability_CAPABILITY_INSTANCES) {
		resp, err := g.p.ext.NodeGroupInstances(ctx, &ext.NodeGroupInstancesRequest{Id: g.id})
		switch err = g.p.wrap("NodeGroupInstances", g.id, err); {
		case err == nil:
			out := make([]cloudprovider.Instance, 0, len(resp.GetInstances()))
			for _, i := range resp.GetInstances() {
				out = append(out, cloudprovider.Instance{Id: i.GetId(), Status: wire.StatusFrom(i.GetStatus()), CreatedAt: wire.TimeFrom(i.GetCreatedAt())})
			}
			return out, nil
		case !isUnimplemented(err):
			return nil, err
		}
	}
	resp, err := g.p.cp.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: g.id})
	if err != nil {
		return nil, g.p.wrap("NodeGroupNodes", g.id, err)
	}
	out := make([]cloudprovider.Instance, 0, len(resp.GetInstances()))
	for _, i := range resp.GetInstances() {
		out = append(out, cloudprovider.Instance{Id: i.GetId(), Status: wire.StatusFrom(i.GetStatus())})
	}
	return out, nil
}

// TemplateNodeInfo implements cloudprovider.NodeGroup: the extension's
// template (Node, ResourceSlices, pods) when the server has one, else
// upstream's (the Node and, from servers that fill resourceSliceBytes,
// its ResourceSlices). Cached until the next
// Refresh; each caller gets its own copy.
func (g *nodeGroup) TemplateNodeInfo() (*cloudprovider.NodeTemplate, error) {
	gen := g.gen()
	if err := g.served(); err != nil {
		return nil, err
	}
	gen.mu.Lock()
	r, ok := gen.templates[g.id]
	gen.mu.Unlock()
	if !ok {
		r.t, r.err = g.template()
		if r.err == nil {
			g.p.events.forget("NodeGroupTemplate", g.id)
			g.p.events.forget("NodeGroupTemplateNodeInfo", g.id)
		}
		gen.mu.Lock()
		gen.templates[g.id] = r
		gen.mu.Unlock()
	}
	return r.t.DeepCopy(), r.err
}

func (g *nodeGroup) template() (*cloudprovider.NodeTemplate, error) {
	if g.has(ext.Capability_CAPABILITY_TEMPLATE) {
		ctx, cancel := g.p.callCtx(g.p.ctx)
		resp, err := g.p.ext.NodeGroupTemplate(ctx, &ext.NodeGroupTemplateRequest{Id: g.id})
		cancel()
		err = g.p.wrap("NodeGroupTemplate", g.id, err)
		if err == nil {
			t, err := wire.TemplateFrom(resp)
			if err != nil {
				g.rejectTemplate("NodeGroupTemplate", err)
				return nil, fmt.Errorf("externalgrpc %s NodeGroupTemplate node group %s: template rejected: %w", g.p.cfg.Address, g.id, err)
			}
			if t != nil {
				return t, nil
			}
			// No template of ours: upstream's may still have the Node.
		} else if !isUnimplemented(err) {
			return nil, err
		}
	}
	ctx, cancel := g.p.callCtx(g.p.ctx)
	defer cancel()
	resp, err := g.p.cp.NodeGroupTemplateNodeInfo(ctx, &pb.NodeGroupTemplateNodeInfoRequest{Id: g.id})
	if err != nil {
		return nil, g.p.wrap("NodeGroupTemplateNodeInfo", g.id, err)
	}
	t, err := wire.UpstreamTemplateFrom(resp, g.id+"-template")
	if err != nil {
		g.rejectTemplate("NodeGroupTemplateNodeInfo", err)
		return nil, fmt.Errorf("externalgrpc %s NodeGroupTemplateNodeInfo node group %s: template rejected: %w", g.p.cfg.Address, g.id, err)
	}
	if t == nil {
		return nil, fmt.Errorf("externalgrpc %s node group %s: the provider publishes no template", g.p.cfg.Address, g.id)
	}
	// A server built before resourceSliceBytes sends the Node only: a DRA
	// pod cannot be placed on this group's new nodes until one of them has
	// registered.
	return t, nil
}

// rejectTemplate tells a template the server sent that cannot be used:
// the group still scales from one of its ready nodes, not from zero.
func (g *nodeGroup) rejectTemplate(rpc string, err error) {
	g.p.badAnswer(rpc, g.id, ReasonInvalidTemplate,
		fmt.Sprintf("node group %q: template rejected: %v; the group has no template from the server (one of its ready nodes can still be one)", g.id, err))
}

// GetOptions implements cloudprovider.NodeGroup.
func (g *nodeGroup) GetOptions(defaults cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	ctx, cancel := g.p.callCtx(g.p.ctx)
	defer cancel()
	resp, err := g.p.cp.NodeGroupGetOptions(ctx, &pb.NodeGroupAutoscalingOptionsRequest{Id: g.id, Defaults: wire.Options(&defaults)})
	if err != nil {
		return nil, g.p.wrap("NodeGroupGetOptions", g.id, err)
	}
	if resp.GetNodeGroupAutoscalingOptions() == nil {
		return nil, fmt.Errorf("externalgrpc %s NodeGroupGetOptions node group %s: empty answer: %w", g.p.cfg.Address, g.id, cloudprovider.ErrNotImplemented)
	}
	out := wire.OptionsFrom(resp.GetNodeGroupAutoscalingOptions())
	wire.OptionsFromLegacy(resp.GetNodeGroupAutoscalingOptions(), out)
	return out, nil
}
