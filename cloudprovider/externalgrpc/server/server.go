// Package server serves any cloudprovider.CloudProvider over the
// externalgrpc protocol: upstream's CloudProvider service (so upstream's
// autoscaler can use it too) and dra-autoscaler's CloudProviderExtension.
// A platform team writes a cloudprovider.CloudProvider in Go and serves it:
//
//	srv := server.New(myProvider)
//	g := grpc.NewServer(grpc.Creds(...))
//	srv.Register(g)
//	g.Serve(lis)
//
// cmd/externalgrpc-kwok is a complete example.
package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/wire"
)

// ProtocolVersion is the extension's version this server speaks.
const ProtocolVersion = 1

// Server adapts a cloudprovider.CloudProvider to both services.
type Server struct {
	cp       cloudprovider.CloudProvider
	name     string
	gpuLabel string
	gpuTypes []string
	upstream bool
	noSlices bool
	// mu serializes the calls into the provider: our providers are written
	// for one loop goroutine, a gRPC server calls from many.
	mu sync.Mutex
}

// ServeOption configures a Server.
type ServeOption func(*Server)

// WithGPULabel sets the GPULabel answer (our interface has no such call).
func WithGPULabel(label string) ServeOption { return func(s *Server) { s.gpuLabel = label } }

// WithGPUTypes sets the GetAvailableGPUTypes answer.
func WithGPUTypes(types ...string) ServeOption { return func(s *Server) { s.gpuTypes = types } }

// WithName sets the server name GetCapabilities reports.
func WithName(name string) ServeOption { return func(s *Server) { s.name = name } }

// UpstreamOnly registers upstream's service only, as a server written for
// upstream's autoscaler would (for tests and for comparison).
func UpstreamOnly() ServeOption { return func(s *Server) { s.upstream = true } }

// NoTemplateSlices leaves resourceSliceBytes out of NodeGroupTemplateNodeInfo,
// as a server built against upstream's protocol before it had the field
// (for tests and for comparison).
func NoTemplateSlices() ServeOption { return func(s *Server) { s.noSlices = true } }

// New returns a server for cp.
func New(cp cloudprovider.CloudProvider, opts ...ServeOption) *Server {
	s := &Server{cp: cp, name: cp.Name()}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register registers the services on r (one port serves both).
func (s *Server) Register(r grpc.ServiceRegistrar) {
	pb.RegisterCloudProviderServer(r, &upstreamService{s: s})
	if !s.upstream {
		ext.RegisterCloudProviderExtensionServer(r, &extensionService{s: s})
	}
}

// statusOf maps a provider error to a gRPC status: ErrNotImplemented is
// UNIMPLEMENTED (the protocol's "optional call absent"), a cancelled or
// expired context is itself, anything else UNKNOWN with the message.
func statusOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cloudprovider.ErrNotImplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

// group finds a node group by id; NOT_FOUND when there is none.
func (s *Server) group(id string) (cloudprovider.NodeGroup, error) {
	for _, g := range s.cp.NodeGroups() {
		if g.Id() == id {
			return g, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "node group %q not found", id)
}

func (s *Server) withGroup(id string, fn func(cloudprovider.NodeGroup) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.group(id)
	if err != nil {
		return err
	}
	return statusOf(fn(g))
}

func positive(delta int32) error {
	if delta <= 0 {
		return status.Errorf(codes.InvalidArgument, "delta %d: must be positive", delta)
	}
	return nil
}

func nodeGroupMsg(g cloudprovider.NodeGroup) *pb.NodeGroup {
	return &pb.NodeGroup{Id: g.Id(), MinSize: int32(g.MinSize()), MaxSize: int32(g.MaxSize()), Debug: g.Debug()}
}

func checkNodes(nodes []*pb.ExternalGrpcNode) ([]*corev1.Node, error) {
	for _, n := range nodes {
		if n.GetName() == "" && n.GetProviderID() == "" {
			return nil, status.Error(codes.InvalidArgument, "a node with neither name nor providerID")
		}
	}
	return wire.NodesFrom(nodes), nil
}

type upstreamService struct {
	pb.UnimplementedCloudProviderServer
	s *Server
}

func (u *upstreamService) NodeGroups(context.Context, *pb.NodeGroupsRequest) (*pb.NodeGroupsResponse, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	resp := &pb.NodeGroupsResponse{}
	for _, g := range u.s.cp.NodeGroups() {
		resp.NodeGroups = append(resp.NodeGroups, nodeGroupMsg(g))
	}
	return resp, nil
}

func (u *upstreamService) NodeGroupForNode(_ context.Context, req *pb.NodeGroupForNodeRequest) (*pb.NodeGroupForNodeResponse, error) {
	if req.GetNode() == nil {
		return nil, status.Error(codes.InvalidArgument, "no node")
	}
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	g, err := u.s.cp.NodeGroupForNode(wire.NodeFrom(req.GetNode()))
	if err != nil {
		return nil, statusOf(err)
	}
	if g == nil {
		// The protocol's "not managed": an empty id.
		return &pb.NodeGroupForNodeResponse{NodeGroup: &pb.NodeGroup{}}, nil
	}
	return &pb.NodeGroupForNodeResponse{NodeGroup: nodeGroupMsg(g)}, nil
}

func (u *upstreamService) PricingNodePrice(_ context.Context, req *pb.PricingNodePriceRequest) (*pb.PricingNodePriceResponse, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	m, err := u.s.cp.Pricing()
	if err != nil {
		return nil, statusOf(err)
	}
	start, end := period(req, req.GetStartTimestamp(), req.GetEndTimestamp())
	price, err := m.NodePrice(wire.NodeFrom(req.GetNode()), start, end)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.PricingNodePriceResponse{Price: price}, nil
}

func (u *upstreamService) PricingPodPrice(_ context.Context, req *pb.PricingPodPriceRequest) (*pb.PricingPodPriceResponse, error) {
	pod := &corev1.Pod{}
	if err := pod.Unmarshal(wire.PodBytes(req)); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "pod_bytes: %v", err)
	}
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	m, err := u.s.cp.Pricing()
	if err != nil {
		return nil, statusOf(err)
	}
	start, end := period(req, req.GetStartTimestamp(), req.GetEndTimestamp())
	price, err := m.PodPrice(pod, start, end)
	if err != nil {
		return nil, statusOf(err)
	}
	return &pb.PricingPodPriceResponse{Price: price}, nil
}

func (u *upstreamService) GPULabel(context.Context, *pb.GPULabelRequest) (*pb.GPULabelResponse, error) {
	return &pb.GPULabelResponse{Label: u.s.gpuLabel}, nil
}

func (u *upstreamService) GetAvailableGPUTypes(context.Context, *pb.GetAvailableGPUTypesRequest) (*pb.GetAvailableGPUTypesResponse, error) {
	resp := &pb.GetAvailableGPUTypesResponse{}
	if len(u.s.gpuTypes) > 0 {
		resp.GpuTypes = map[string]*anypb.Any{}
		for _, t := range u.s.gpuTypes {
			// Only the keys mean anything (upstream's server sends nil too).
			resp.GpuTypes[t] = nil
		}
	}
	return resp, nil
}

func (u *upstreamService) Cleanup(context.Context, *pb.CleanupRequest) (*pb.CleanupResponse, error) {
	// The provider lives as long as the server, not one client: a client
	// that stops does not stop the provider for the next one.
	return &pb.CleanupResponse{}, nil
}

func (u *upstreamService) Refresh(ctx context.Context, _ *pb.RefreshRequest) (*pb.RefreshResponse, error) {
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	return &pb.RefreshResponse{}, statusOf(u.s.cp.Refresh(ctx))
}

func (u *upstreamService) NodeGroupTargetSize(_ context.Context, req *pb.NodeGroupTargetSizeRequest) (*pb.NodeGroupTargetSizeResponse, error) {
	resp := &pb.NodeGroupTargetSizeResponse{}
	err := u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		n, err := g.TargetSize()
		resp.TargetSize = int32(n)
		return err
	})
	return resp, err
}

func (u *upstreamService) NodeGroupIncreaseSize(ctx context.Context, req *pb.NodeGroupIncreaseSizeRequest) (*pb.NodeGroupIncreaseSizeResponse, error) {
	if err := positive(req.GetDelta()); err != nil {
		return nil, err
	}
	return &pb.NodeGroupIncreaseSizeResponse{}, u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		_, err := g.IncreaseSize(ctx, int(req.GetDelta()))
		return err
	})
}

func (u *upstreamService) NodeGroupDeleteNodes(ctx context.Context, req *pb.NodeGroupDeleteNodesRequest) (*pb.NodeGroupDeleteNodesResponse, error) {
	nodes, err := checkNodes(req.GetNodes())
	if err != nil {
		return nil, err
	}
	return &pb.NodeGroupDeleteNodesResponse{}, u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		return g.DeleteNodes(ctx, nodes)
	})
}

func (u *upstreamService) NodeGroupDecreaseTargetSize(ctx context.Context, req *pb.NodeGroupDecreaseTargetSizeRequest) (*pb.NodeGroupDecreaseTargetSizeResponse, error) {
	if req.GetDelta() >= 0 {
		return nil, status.Errorf(codes.InvalidArgument, "delta %d: must be negative", req.GetDelta())
	}
	return &pb.NodeGroupDecreaseTargetSizeResponse{}, u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		return g.DecreaseTargetSize(ctx, int(req.GetDelta()))
	})
}

func (u *upstreamService) NodeGroupNodes(_ context.Context, req *pb.NodeGroupNodesRequest) (*pb.NodeGroupNodesResponse, error) {
	resp := &pb.NodeGroupNodesResponse{}
	err := u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		insts, err := g.Nodes()
		for _, i := range insts {
			resp.Instances = append(resp.Instances, &pb.Instance{Id: i.Id, Status: wire.Status(i.Status)})
		}
		return err
	})
	return resp, err
}

func (u *upstreamService) NodeGroupTemplateNodeInfo(_ context.Context, req *pb.NodeGroupTemplateNodeInfoRequest) (*pb.NodeGroupTemplateNodeInfoResponse, error) {
	resp := &pb.NodeGroupTemplateNodeInfoResponse{}
	err := u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		t, err := g.TemplateNodeInfo()
		if err != nil {
			return err
		}
		if resp, err = wire.UpstreamTemplate(t, u.s.noSlices); err == nil {
			wire.AddLegacyTemplateNode(resp)
		}
		return err
	})
	return resp, err
}

func (u *upstreamService) NodeGroupGetOptions(_ context.Context, req *pb.NodeGroupAutoscalingOptionsRequest) (*pb.NodeGroupAutoscalingOptionsResponse, error) {
	resp := &pb.NodeGroupAutoscalingOptionsResponse{}
	err := u.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		defaults := wire.OptionsFrom(req.GetDefaults())
		if defaults == nil {
			defaults = &cloudprovider.NodeGroupAutoscalingOptions{}
		}
		o, err := g.GetOptions(*defaults)
		if err != nil {
			return err
		}
		if o == nil {
			return fmt.Errorf("node group %s: no options: %w", g.Id(), cloudprovider.ErrNotImplemented)
		}
		resp.NodeGroupAutoscalingOptions = wire.Options(o)
		wire.AddLegacyOptions(resp.NodeGroupAutoscalingOptions)
		return nil
	})
	return resp, err
}

// period is a pricing request's period: the timestamps, or the old fields
// a client of 1.34 or older sends.
func period(req proto.Message, start, end *timestamppb.Timestamp) (time.Time, time.Time) {
	if start == nil && end == nil {
		return wire.LegacyPricingPeriod(req)
	}
	return wire.TimeFrom(start), wire.TimeFrom(end)
}
