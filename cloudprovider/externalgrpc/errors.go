package externalgrpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// CallError is a failed call: it names the server, the RPC and the group,
// so that a log line or an event says where things broke.
type CallError struct {
	Address string
	RPC     string
	// Group is the node group the call was about ("" for provider-wide).
	Group   string
	Code    codes.Code
	Message string
}

func (e *CallError) Error() string {
	where := "externalgrpc " + e.Address + " " + e.RPC
	if e.Group != "" {
		where += " node group " + e.Group
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Code, e.Message)
}

// Unwrap makes errors.Is(err, cloudprovider.ErrNotImplemented) hold for a
// server that does not offer the RPC.
func (e *CallError) Unwrap() error {
	if e.Code == codes.Unimplemented {
		return cloudprovider.ErrNotImplemented
	}
	return nil
}

// Unknown tells whether the server may have acted although the call
// failed (the reply was lost or came too late): the caller must re-read
// the state instead of retrying.
func (e *CallError) Unknown() bool {
	return e.Code == codes.DeadlineExceeded || e.Code == codes.Canceled || e.Code == codes.Unavailable || e.Code == codes.Unknown
}

// wrap turns a gRPC error into a CallError.
func (p *Provider) wrap(rpc, group string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, cloudprovider.ErrReadOnly) {
		// Refused here (ReadOnly), never sent: keep the error's kind.
		return fmt.Errorf("externalgrpc %s %s: %w", p.cfg.Address, rpc, err)
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		st = status.New(codes.DeadlineExceeded, err.Error())
	}
	return &CallError{Address: p.cfg.Address, RPC: rpc, Group: group, Code: st.Code(), Message: st.Message()}
}

// isUnimplemented tells whether an error is the server's "no such RPC".
func isUnimplemented(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && ce.Code == codes.Unimplemented
}
