// Package cloudprovider is the seam between the autoscaler and the
// infrastructure: node groups that can grow and shrink, what a new node of a
// group would look like (its Node, the ResourceSlices its DRA drivers would
// publish, the pods that would run there), and what capacity is already paid
// for. Implementations live in sub-folders, one per provider; this package
// imports nothing of the project, only Kubernetes API types.
package cloudprovider

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ErrNotImplemented is returned by optional methods a provider does not offer.
var ErrNotImplemented = errors.New("not implemented by this cloud provider")

// ErrInvalidAnswer is wrapped by a group's TargetSize when the
// infrastructure answered, but with a value that cannot be true (a
// negative size): the loop leaves that group out of the pass and goes on
// with the others. Any other TargetSize error fails the pass, since the
// group's size is then merely unknown.
var ErrInvalidAnswer = errors.New("invalid answer from the cloud provider")

// CloudProvider is one source of node groups.
type CloudProvider interface {
	// Name identifies the provider (the --cloud-provider value).
	Name() string
	// NodeGroups returns the groups the autoscaler may scale.
	NodeGroups() []NodeGroup
	// NodeGroupForNode returns the group of a node, or nil (and no error)
	// when the node belongs to no scalable group.
	NodeGroupForNode(node *corev1.Node) (NodeGroup, error)
	// HasInstance tells whether the node still has an instance behind it.
	HasInstance(node *corev1.Node) (bool, error)
	// Pricing returns the provider's price model, or ErrNotImplemented.
	Pricing() (PricingModel, error)
	// GetResourceLimiter returns the provider's own resource limits (cores,
	// memory, device totals); the autoscaler combines them with its flags.
	GetResourceLimiter() (*ResourceLimiter, error)
	// Reservations returns the capacity reservations and capacity blocks
	// the provider knows of, or ErrNotImplemented.
	Reservations() ([]ReservedCapacity, error)
	// Refresh is called at the start of every loop, before anything else.
	Refresh(ctx context.Context) error
	// Cleanup is called once when the autoscaler stops.
	Cleanup() error
}

// NodeGroup is a set of nodes of one shape that grows and shrinks together.
type NodeGroup interface {
	// Id is unique across the provider.
	Id() string
	MinSize() int
	MaxSize() int
	// TargetSize is the requested size, which may exceed the number of
	// registered nodes while instances boot. An error wrapping
	// ErrInvalidAnswer leaves only this group out of the pass.
	TargetSize() (int, error)
	// IncreaseSize asks for delta more nodes; partial success is possible.
	// It returns the ids (providerIDs) of the instances this call created,
	// as far as the provider knows them when it returns: a provider whose
	// instances appear later (a controller creates them) returns none, and
	// the autoscaler then never removes a registered node on the request's
	// behalf. The ids are returned with an error too, on partial success.
	IncreaseSize(ctx context.Context, delta int) (created []string, err error)
	// AtomicIncreaseSize asks for delta more nodes, all or none: the
	// provider either obtains every node or leaves the group as it was.
	// Created ids as for IncreaseSize.
	AtomicIncreaseSize(ctx context.Context, delta int) (created []string, err error)
	// DeleteNodes removes the nodes (already drained) and decreases the
	// target size; it refuses to go below MinSize.
	DeleteNodes(ctx context.Context, nodes []*corev1.Node) error
	// ForceDeleteNodes removes the nodes even below MinSize (for instances
	// that failed to register).
	ForceDeleteNodes(ctx context.Context, nodes []*corev1.Node) error
	// DecreaseTargetSize lowers the target by delta (negative) without
	// removing registered nodes: it gives up requests still in flight.
	DecreaseTargetSize(ctx context.Context, delta int) error
	// Debug is a one-line description for logs.
	Debug() string
	// Nodes lists the group's instances with their state.
	Nodes() ([]Instance, error)
	// TemplateNodeInfo describes a node this group would add: the Node,
	// the ResourceSlices its DRA drivers would publish and the pods that
	// would start there. Used when no healthy node of the group exists.
	TemplateNodeInfo() (*NodeTemplate, error)
	// GetOptions returns per-group overrides of the autoscaling options,
	// or ErrNotImplemented to use the defaults.
	GetOptions(defaults NodeGroupAutoscalingOptions) (*NodeGroupAutoscalingOptions, error)
}

// Instance is one machine of a node group.
type Instance struct {
	// Id is the instance's providerID (as in node.spec.providerID).
	Id string
	// Status is nil when the provider does not know the state.
	Status *InstanceStatus
	// CreatedAt is when the instance was requested, as the provider
	// records it (zero when unknown). Provision deadlines are counted from
	// it, so that a restarted autoscaler gives up an instance exactly when
	// the old one would have.
	CreatedAt time.Time
}

// InstanceState is where an instance is in its life.
type InstanceState int

const (
	InstanceRunning InstanceState = iota + 1
	InstanceCreating
	InstanceDeleting
)

// InstanceStatus is the state of an instance and, for a failed creation,
// why it failed.
type InstanceStatus struct {
	State     InstanceState
	ErrorInfo *InstanceErrorInfo
}

// InstanceErrorClass sorts creation failures: out of capacity (try another
// group) or anything else.
type InstanceErrorClass int

const (
	OutOfResourcesErrorClass InstanceErrorClass = iota + 1
	OtherErrorClass
)

// InstanceErrorInfo describes a failed instance creation.
type InstanceErrorInfo struct {
	ErrorClass   InstanceErrorClass
	ErrorCode    string
	ErrorMessage string
}

// NodeGroupAutoscalingOptions are the per-group knobs a provider may
// override. GetOptions is given the flags' values as defaults and returns
// the group's; ErrNotImplemented means the defaults.
type NodeGroupAutoscalingOptions struct {
	ScaleDownUtilizationThreshold    float64
	ScaleDownGpuUtilizationThreshold float64
	ScaleDownUnneededTime            time.Duration
	ScaleDownUnreadyTime             time.Duration
	MaxNodeProvisionTime             time.Duration
	// ZeroOrMaxNodeScaling: the group scales up to its max size, or down
	// to zero, all at once (upstream's zeroOrMaxNodeScaling).
	ZeroOrMaxNodeScaling bool
}

// PricingModel prices nodes and pods for the price expander.
type PricingModel interface {
	// NodePrice is the cost of running the node between start and end.
	NodePrice(node *corev1.Node, start, end time.Time) (float64, error)
	// PodPrice is the cost of a pod's requests over the same period.
	PodPrice(pod *corev1.Pod, start, end time.Time) (float64, error)
}
