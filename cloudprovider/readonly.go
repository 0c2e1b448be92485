package cloudprovider

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ErrReadOnly is wrapped by every change a read-only view refuses: a
// ReadOnly provider's node group writes, and the read-only transports the
// binary gives `explain` (Kubernetes API writes, externalgrpc RPCs that
// are not reads).
var ErrReadOnly = errors.New("read-only: changes are refused")

// Closer is an optional CloudProvider method for providers that hold local
// resources (connections, informers, goroutines): Close releases them and
// tells the infrastructure nothing, unlike Cleanup, which a provider may
// pass on (upstream's externalgrpc server tears its provider down on
// Cleanup). A ReadOnly view's Cleanup calls Close and never Cleanup.
type Closer interface {
	Close() error
}

// ReadOnly returns a view of cp for callers that must only look (`explain`,
// any dry run): every read is cp's, every write of its node groups
// (IncreaseSize, AtomicIncreaseSize, DeleteNodes, ForceDeleteNodes,
// DecreaseTargetSize) returns an error wrapping ErrReadOnly without
// reaching cp, and Cleanup releases only cp's local resources (Closer),
// never calling cp's Cleanup. Refresh is a read: it re-reads the
// infrastructure's state.
//
// The view is the only provider such a caller holds, so no code path of
// it can reach a write, however the stages are classified.
func ReadOnly(cp CloudProvider) CloudProvider {
	if ro, ok := cp.(readOnlyProvider); ok {
		return ro
	}
	return readOnlyProvider{cp: cp}
}

// readOnlyProvider is a value, so views of one provider compare equal.
type readOnlyProvider struct{ cp CloudProvider }

var _ CloudProvider = readOnlyProvider{}

func (r readOnlyProvider) Name() string { return r.cp.Name() }

func (r readOnlyProvider) NodeGroups() []NodeGroup {
	groups := r.cp.NodeGroups()
	out := make([]NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = readOnlyGroup{g: g}
	}
	return out
}

func (r readOnlyProvider) NodeGroupForNode(node *corev1.Node) (NodeGroup, error) {
	g, err := r.cp.NodeGroupForNode(node)
	if err != nil || g == nil {
		// A nil group stays a nil interface: "not managed".
		return nil, err
	}
	return readOnlyGroup{g: g}, nil
}

func (r readOnlyProvider) HasInstance(node *corev1.Node) (bool, error) { return r.cp.HasInstance(node) }

// Pricing's model only reads.
func (r readOnlyProvider) Pricing() (PricingModel, error) { return r.cp.Pricing() }

func (r readOnlyProvider) GetResourceLimiter() (*ResourceLimiter, error) {
	return r.cp.GetResourceLimiter()
}

func (r readOnlyProvider) Reservations() ([]ReservedCapacity, error) { return r.cp.Reservations() }

func (r readOnlyProvider) Refresh(ctx context.Context) error { return r.cp.Refresh(ctx) }

// Cleanup releases cp's local resources only.
func (r readOnlyProvider) Cleanup() error {
	if c, ok := r.cp.(Closer); ok {
		return c.Close()
	}
	return nil
}

// readOnlyGroup is a value for the same reason: the loop may compare
// groups, and two views of one group must be equal.
type readOnlyGroup struct{ g NodeGroup }

var (
	_ NodeGroup        = readOnlyGroup{}
	_ ReservationNamer = readOnlyGroup{}
)

func (r readOnlyGroup) refuse(what string) error {
	return fmt.Errorf("node group %s: %s: %w", r.g.Id(), what, ErrReadOnly)
}

func (r readOnlyGroup) Id() string                 { return r.g.Id() }
func (r readOnlyGroup) MinSize() int               { return r.g.MinSize() }
func (r readOnlyGroup) MaxSize() int               { return r.g.MaxSize() }
func (r readOnlyGroup) TargetSize() (int, error)   { return r.g.TargetSize() }
func (r readOnlyGroup) Debug() string              { return r.g.Debug() }
func (r readOnlyGroup) Nodes() ([]Instance, error) { return r.g.Nodes() }
func (r readOnlyGroup) TemplateNodeInfo() (*NodeTemplate, error) {
	return r.g.TemplateNodeInfo()
}
func (r readOnlyGroup) GetOptions(defaults NodeGroupAutoscalingOptions) (*NodeGroupAutoscalingOptions, error) {
	return r.g.GetOptions(defaults)
}

// CapacityReservation keeps the optional ReservationNamer visible through
// the view ("" when the group names none, as when it has no such method),
// so the view plans exactly as the group does.
func (r readOnlyGroup) CapacityReservation() string {
	if n, ok := r.g.(ReservationNamer); ok {
		return n.CapacityReservation()
	}
	return ""
}

func (r readOnlyGroup) IncreaseSize(context.Context, int) ([]string, error) {
	return nil, r.refuse("IncreaseSize")
}

func (r readOnlyGroup) AtomicIncreaseSize(context.Context, int) ([]string, error) {
	return nil, r.refuse("AtomicIncreaseSize")
}

func (r readOnlyGroup) DeleteNodes(context.Context, []*corev1.Node) error {
	return r.refuse("DeleteNodes")
}

func (r readOnlyGroup) ForceDeleteNodes(context.Context, []*corev1.Node) error {
	return r.refuse("ForceDeleteNodes")
}

func (r readOnlyGroup) DecreaseTargetSize(context.Context, int) error {
	return r.refuse("DecreaseTargetSize")
}
