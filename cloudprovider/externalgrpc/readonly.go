package externalgrpc

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
)

// readRPCs are the RPCs of both services that only read the server's
// state. They alone are retried (retryServiceConfig), and they alone
// leave a read-only provider (ReadOnly). Refresh is one: it asks the
// server to re-read its infrastructure, as every pass does.
var readRPCs = []string{
	pb.CloudProvider_NodeGroups_FullMethodName,
	pb.CloudProvider_NodeGroupForNode_FullMethodName,
	pb.CloudProvider_PricingNodePrice_FullMethodName,
	pb.CloudProvider_PricingPodPrice_FullMethodName,
	pb.CloudProvider_GPULabel_FullMethodName,
	pb.CloudProvider_GetAvailableGPUTypes_FullMethodName,
	pb.CloudProvider_Refresh_FullMethodName,
	pb.CloudProvider_NodeGroupTargetSize_FullMethodName,
	pb.CloudProvider_NodeGroupNodes_FullMethodName,
	pb.CloudProvider_NodeGroupTemplateNodeInfo_FullMethodName,
	pb.CloudProvider_NodeGroupGetOptions_FullMethodName,
	ext.CloudProviderExtension_GetCapabilities_FullMethodName,
	ext.CloudProviderExtension_NodeGroupTemplate_FullMethodName,
	ext.CloudProviderExtension_NodeGroupInstances_FullMethodName,
	ext.CloudProviderExtension_Reservations_FullMethodName,
}

// ReadOnly makes the provider's connection carry reads only: a client
// interceptor refuses every RPC outside readRPCs (Cleanup, every size and
// delete RPC, and any RPC added later until it is listed) before it leaves
// the process, with an error wrapping cloudprovider.ErrReadOnly; calls
// carry ReadOnlyUserAgent. For `explain`, beneath cloudprovider.ReadOnly:
// even the provider's own Cleanup cannot reach the server.
func ReadOnly() ProviderOption {
	return func(_ *Provider, d *[]grpc.DialOption) {
		*d = append(*d, grpc.WithChainUnaryInterceptor(refuseWrites), grpc.WithChainStreamInterceptor(refuseStreams),
			grpc.WithUserAgent(ReadOnlyUserAgent))
	}
}

// refuseWrites is ReadOnly's unary interceptor.
func refuseWrites(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !slices.Contains(readRPCs, method) {
		return readOnlyError{method: method}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// refuseStreams refuses every stream: neither service has one, so a
// stream is an RPC nobody has judged to be a read.
func refuseStreams(_ context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, method string, _ grpc.Streamer, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, readOnlyError{method: method}
}

// readOnlyError is a refused RPC: cloudprovider.ErrReadOnly to errors.Is,
// PERMISSION_DENIED to gRPC.
type readOnlyError struct{ method string }

func (e readOnlyError) Error() string {
	return fmt.Sprintf("%s not sent: %v", e.method, cloudprovider.ErrReadOnly)
}

func (e readOnlyError) Unwrap() error { return cloudprovider.ErrReadOnly }

func (e readOnlyError) GRPCStatus() *status.Status {
	return status.New(codes.PermissionDenied, e.Error())
}
