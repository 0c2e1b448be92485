package server

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes/fake"

	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
)

// serve serves a kwok provider (on a fake clientset) over bufconn and
// returns clients of both services.
func serve(t *testing.T, opts ...ServeOption) (pb.CloudProviderClient, ext.CloudProviderExtensionClient) {
	t.Helper()
	cfg := &kwok.Config{NodeGroups: []kwok.NodeGroupConfig{{Name: "cpu", MinSize: 0, MaxSize: 3,
		Template: kwok.TemplateConfig{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}}}}}
	cp, err := kwok.New(fake.NewClientset(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Cleanup() })
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	New(cp, opts...).Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := pb.NewCloudProviderClient(conn)
	if _, err := c.Refresh(context.Background(), &pb.RefreshRequest{}); err != nil {
		t.Fatal(err)
	}
	return c, ext.NewCloudProviderExtensionClient(conn)
}

// TestStatusCodes: what the library answers a client that sends what our
// client never would (an upstream client, another language's).
func TestStatusCodes(t *testing.T) {
	c, e := serve(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"unknown group", func() error {
			_, err := c.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "nope"})
			return err
		}, codes.NotFound},
		{"zero increase", func() error {
			_, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "cpu", Delta: 0})
			return err
		}, codes.InvalidArgument},
		{"negative atomic increase", func() error {
			_, err := e.NodeGroupAtomicIncreaseSize(ctx, &ext.NodeGroupIncreaseRequest{Id: "cpu", Delta: -2})
			return err
		}, codes.InvalidArgument},
		{"positive decrease", func() error {
			_, err := c.NodeGroupDecreaseTargetSize(ctx, &pb.NodeGroupDecreaseTargetSizeRequest{Id: "cpu", Delta: 1})
			return err
		}, codes.InvalidArgument},
		{"delete a node with no name", func() error {
			_, err := c.NodeGroupDeleteNodes(ctx, &pb.NodeGroupDeleteNodesRequest{Id: "cpu", Nodes: []*pb.ExternalGrpcNode{{}}})
			return err
		}, codes.InvalidArgument},
		{"garbage pod", func() error {
			_, err := c.PricingPodPrice(ctx, &pb.PricingPodPriceRequest{PodBytes: []byte{0xff}})
			return err
		}, codes.InvalidArgument},
		{"over max", func() error {
			_, err := c.NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "cpu", Delta: 9})
			return err
		}, codes.Unknown},
		{"no options (kwok has none)", func() error {
			_, err := c.NodeGroupGetOptions(ctx, &pb.NodeGroupAutoscalingOptionsRequest{Id: "cpu"})
			return err
		}, codes.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Fatalf("code %s, want %s", got, tc.want)
			}
		})
	}
}

func TestUpstreamShapesOfAnswers(t *testing.T) {
	c, e := serve(t, WithGPULabel("example.com/gpu"), WithGPUTypes("a100"))
	ctx := context.Background()
	resp, err := c.NodeGroupForNode(ctx, &pb.NodeGroupForNodeRequest{Node: &pb.ExternalGrpcNode{Name: "stranger"}})
	if err != nil || resp.GetNodeGroup() == nil || resp.GetNodeGroup().GetId() != "" {
		t.Fatalf("an unmanaged node: %v, %v; want a NodeGroup with an empty id, as upstream reads it", resp, err)
	}
	l, _ := c.GPULabel(ctx, &pb.GPULabelRequest{})
	types, _ := c.GetAvailableGPUTypes(ctx, &pb.GetAvailableGPUTypesRequest{})
	if _, ok := types.GetGpuTypes()["a100"]; l.GetLabel() != "example.com/gpu" || !ok {
		t.Fatalf("GPU label %q types %v", l.GetLabel(), types.GetGpuTypes())
	}
	tmpl, err := c.NodeGroupTemplateNodeInfo(ctx, &pb.NodeGroupTemplateNodeInfoRequest{Id: "cpu"})
	if err != nil || len(tmpl.GetNodeBytes()) == 0 {
		t.Fatalf("upstream template: %v, %v", tmpl, err)
	}
	caps, err := e.GetCapabilities(ctx, &ext.GetCapabilitiesRequest{})
	if err != nil || caps.GetProtocolVersion() != ProtocolVersion || len(caps.GetCapabilities()) != 6 || caps.GetServerName() != "kwok" {
		t.Fatalf("capabilities %v, %v", caps, err)
	}
	// Upstream's Cleanup does not stop the provider for the next client.
	if _, err := c.Cleanup(ctx, &pb.CleanupRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.NodeGroupIncreaseSize(ctx, &ext.NodeGroupIncreaseRequest{Id: "cpu", Delta: 1}); err != nil {
		t.Fatalf("IncreaseSize after a client's Cleanup: %v", err)
	}
}

func TestUpstreamOnlyHasNoExtension(t *testing.T) {
	_, e := serve(t, UpstreamOnly())
	_, err := e.GetCapabilities(context.Background(), &ext.GetCapabilitiesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetCapabilities on an upstream-only server: %v, want Unimplemented", err)
	}
}
