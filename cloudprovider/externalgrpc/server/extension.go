package server

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/wire"
)

type extensionService struct {
	ext.UnimplementedCloudProviderExtensionServer
	s *Server
}

func (e *extensionService) GetCapabilities(context.Context, *ext.GetCapabilitiesRequest) (*ext.GetCapabilitiesResponse, error) {
	// Every cloudprovider.CloudProvider has all of these methods; one that
	// does not offer a call answers it with ErrNotImplemented, which the
	// client reads as "absent" call by call.
	return &ext.GetCapabilitiesResponse{
		ProtocolVersion: ProtocolVersion,
		ServerName:      e.s.name,
		Capabilities: []ext.Capability{
			ext.Capability_CAPABILITY_TEMPLATE,
			ext.Capability_CAPABILITY_ATOMIC_INCREASE_SIZE,
			ext.Capability_CAPABILITY_INCREASE_SIZE_IDS,
			ext.Capability_CAPABILITY_FORCE_DELETE_NODES,
			ext.Capability_CAPABILITY_INSTANCES,
			ext.Capability_CAPABILITY_RESERVATIONS,
		},
	}, nil
}

func (e *extensionService) NodeGroupTemplate(_ context.Context, req *ext.NodeGroupTemplateRequest) (*ext.NodeGroupTemplateResponse, error) {
	var resp *ext.NodeGroupTemplateResponse
	err := e.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		t, err := g.TemplateNodeInfo()
		if err != nil {
			return err
		}
		resp, err = wire.Template(t)
		return err
	})
	return resp, err
}

func (e *extensionService) increase(id string, delta int32, fn func(cloudprovider.NodeGroup, int) ([]string, error)) (*ext.NodeGroupIncreaseResponse, error) {
	if err := positive(delta); err != nil {
		return nil, err
	}
	resp := &ext.NodeGroupIncreaseResponse{}
	err := e.s.withGroup(id, func(g cloudprovider.NodeGroup) error {
		var err error
		// The ids travel with an error too: a partial increase.
		resp.CreatedIds, err = fn(g, int(delta))
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (e *extensionService) NodeGroupAtomicIncreaseSize(ctx context.Context, req *ext.NodeGroupIncreaseRequest) (*ext.NodeGroupIncreaseResponse, error) {
	return e.increase(req.GetId(), req.GetDelta(), func(g cloudprovider.NodeGroup, d int) ([]string, error) {
		return g.AtomicIncreaseSize(ctx, d)
	})
}

func (e *extensionService) NodeGroupIncreaseSize(ctx context.Context, req *ext.NodeGroupIncreaseRequest) (*ext.NodeGroupIncreaseResponse, error) {
	return e.increase(req.GetId(), req.GetDelta(), func(g cloudprovider.NodeGroup, d int) ([]string, error) {
		return g.IncreaseSize(ctx, d)
	})
}

func (e *extensionService) NodeGroupForceDeleteNodes(ctx context.Context, req *ext.NodeGroupForceDeleteNodesRequest) (*ext.NodeGroupForceDeleteNodesResponse, error) {
	nodes, err := checkNodes(req.GetNodes())
	if err != nil {
		return nil, err
	}
	return &ext.NodeGroupForceDeleteNodesResponse{}, e.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		return g.ForceDeleteNodes(ctx, nodes)
	})
}

func (e *extensionService) NodeGroupInstances(_ context.Context, req *ext.NodeGroupInstancesRequest) (*ext.NodeGroupInstancesResponse, error) {
	resp := &ext.NodeGroupInstancesResponse{}
	err := e.s.withGroup(req.GetId(), func(g cloudprovider.NodeGroup) error {
		insts, err := g.Nodes()
		for _, i := range insts {
			resp.Instances = append(resp.Instances, &ext.ExtInstance{Id: i.Id, Status: wire.Status(i.Status), CreatedAt: wire.Timestamp(i.CreatedAt)})
		}
		return err
	})
	return resp, err
}

func (e *extensionService) Reservations(context.Context, *ext.ReservationsRequest) (*ext.ReservationsResponse, error) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	rs, err := e.s.cp.Reservations()
	if err != nil {
		return nil, statusOf(err)
	}
	resp := &ext.ReservationsResponse{}
	for _, r := range rs {
		resp.Reservations = append(resp.Reservations, wire.Reservation(r))
	}
	return resp, nil
}
