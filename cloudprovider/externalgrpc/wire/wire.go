// Package wire converts between the cloudprovider types and the
// externalgrpc protocol's messages. The client and the server library both
// use it, so the two ends agree by construction; the mapping that is not a
// plain copy (error classes, instance states, the options upstream has and
// we do not) is in one place.
package wire

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	pb "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos"
	ext "github.com/dra-autoscaler/dra-autoscaler/cloudprovider/externalgrpc/protos/draext/v1"
)

// Upstream's instance error classes. Ours number differently
// (OtherErrorClass is 2), so they are mapped, never cast.
const (
	UpstreamOutOfResourcesClass int32 = 1
	UpstreamOtherClass          int32 = 99
)

// ResourceAPIVersion is the only slice version the extension carries.
const ResourceAPIVersion = "resource.k8s.io/v1"

// Node is the part of a node that crosses the wire.
func Node(n *corev1.Node) *pb.ExternalGrpcNode {
	if n == nil {
		return nil
	}
	return &pb.ExternalGrpcNode{ProviderID: n.Spec.ProviderID, Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}
}

// NodeFrom rebuilds a Node from what crossed the wire.
func NodeFrom(n *pb.ExternalGrpcNode) *corev1.Node {
	if n == nil {
		return nil
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.GetName(), Labels: n.GetLabels(), Annotations: n.GetAnnotations()},
		Spec:       corev1.NodeSpec{ProviderID: n.GetProviderID()},
	}
}

// Nodes converts a list.
func Nodes(nodes []*corev1.Node) []*pb.ExternalGrpcNode {
	out := make([]*pb.ExternalGrpcNode, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, Node(n))
	}
	return out
}

// NodesFrom converts a list back.
func NodesFrom(nodes []*pb.ExternalGrpcNode) []*corev1.Node {
	out := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, NodeFrom(n))
	}
	return out
}

// ErrorClass maps upstream's class numbers to ours; unknown ones are Other.
func ErrorClass(c int32) cloudprovider.InstanceErrorClass {
	if c == UpstreamOutOfResourcesClass {
		return cloudprovider.OutOfResourcesErrorClass
	}
	return cloudprovider.OtherErrorClass
}

// UpstreamErrorClass maps ours to upstream's numbers.
func UpstreamErrorClass(c cloudprovider.InstanceErrorClass) int32 {
	if c == cloudprovider.OutOfResourcesErrorClass {
		return UpstreamOutOfResourcesClass
	}
	return UpstreamOtherClass
}

// Status converts an instance status (nil stays nil).
func Status(s *cloudprovider.InstanceStatus) *pb.InstanceStatus {
	if s == nil {
		return nil
	}
	out := &pb.InstanceStatus{}
	switch s.State {
	case cloudprovider.InstanceRunning:
		out.InstanceState = pb.InstanceStatus_instanceRunning
	case cloudprovider.InstanceCreating:
		out.InstanceState = pb.InstanceStatus_instanceCreating
	case cloudprovider.InstanceDeleting:
		out.InstanceState = pb.InstanceStatus_instanceDeleting
	}
	if e := s.ErrorInfo; e != nil {
		code := e.ErrorCode
		if code == "" {
			// Upstream reads an empty code as "no error".
			code = "unknown"
		}
		out.ErrorInfo = &pb.InstanceErrorInfo{ErrorCode: code, ErrorMessage: e.ErrorMessage, InstanceErrorClass: UpstreamErrorClass(e.ErrorClass)}
	}
	return out
}

// StatusFrom converts back: an unspecified state without error is nil, as
// upstream reads it.
func StatusFrom(s *pb.InstanceStatus) *cloudprovider.InstanceStatus {
	if s == nil {
		return nil
	}
	var out cloudprovider.InstanceStatus
	switch s.GetInstanceState() {
	case pb.InstanceStatus_instanceRunning:
		out.State = cloudprovider.InstanceRunning
	case pb.InstanceStatus_instanceCreating:
		out.State = cloudprovider.InstanceCreating
	case pb.InstanceStatus_instanceDeleting:
		out.State = cloudprovider.InstanceDeleting
	}
	if e := s.GetErrorInfo(); e.GetErrorCode() != "" {
		out.ErrorInfo = &cloudprovider.InstanceErrorInfo{ErrorClass: ErrorClass(e.GetInstanceErrorClass()), ErrorCode: e.GetErrorCode(), ErrorMessage: e.GetErrorMessage()}
	}
	if out.State == 0 && out.ErrorInfo == nil {
		return nil
	}
	return &out
}

// Options converts our options to upstream's message; the fields we do not
// have travel as zero.
func Options(o *cloudprovider.NodeGroupAutoscalingOptions) *pb.NodeGroupAutoscalingOptions {
	if o == nil {
		return nil
	}
	return &pb.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.ScaleDownUtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: o.ScaleDownGpuUtilizationThreshold,
		ScaleDownUnneededDuration:        durationpb.New(o.ScaleDownUnneededTime),
		ScaleDownUnreadyDuration:         durationpb.New(o.ScaleDownUnreadyTime),
		MaxNodeProvisionDuration:         durationpb.New(o.MaxNodeProvisionTime),
		ZeroOrMaxNodeScaling:             o.ZeroOrMaxNodeScaling,
	}
}

// OptionsFrom converts back (nil stays nil).
func OptionsFrom(o *pb.NodeGroupAutoscalingOptions) *cloudprovider.NodeGroupAutoscalingOptions {
	if o == nil {
		return nil
	}
	return &cloudprovider.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    o.GetScaleDownUtilizationThreshold(),
		ScaleDownGpuUtilizationThreshold: o.GetScaleDownGpuUtilizationThreshold(),
		ScaleDownUnneededTime:            o.GetScaleDownUnneededDuration().AsDuration(),
		ScaleDownUnreadyTime:             o.GetScaleDownUnreadyDuration().AsDuration(),
		MaxNodeProvisionTime:             o.GetMaxNodeProvisionDuration().AsDuration(),
		ZeroOrMaxNodeScaling:             o.GetZeroOrMaxNodeScaling(),
	}
}

// Timestamp converts a time; zero (unknown, unbounded) is unset.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// TimeFrom converts back; unset is zero.
func TimeFrom(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

var kinds = map[cloudprovider.ReservationKind]ext.ReservationKind{
	cloudprovider.ReservationOpen:          ext.ReservationKind_RESERVATION_KIND_OPEN,
	cloudprovider.ReservationTargeted:      ext.ReservationKind_RESERVATION_KIND_TARGETED,
	cloudprovider.ReservationCapacityBlock: ext.ReservationKind_RESERVATION_KIND_CAPACITY_BLOCK,
}

// Reservation converts a reservation.
func Reservation(r cloudprovider.ReservedCapacity) *ext.Reservation {
	return &ext.Reservation{
		Id: r.ID, Kind: kinds[r.Kind], NodeGroups: r.NodeGroups, Count: int32(r.Count), InUse: int32(r.InUse),
		Start: Timestamp(r.Start), End: Timestamp(r.End), PricePerNodeHour: r.Price,
	}
}

// ReservationFrom converts and validates a reservation.
func ReservationFrom(r *ext.Reservation) (cloudprovider.ReservedCapacity, error) {
	out := cloudprovider.ReservedCapacity{
		ID: r.GetId(), NodeGroups: r.GetNodeGroups(), Count: int(r.GetCount()), InUse: int(r.GetInUse()),
		Start: TimeFrom(r.GetStart()), End: TimeFrom(r.GetEnd()), Price: r.GetPricePerNodeHour(),
	}
	for k, v := range kinds {
		if v == r.GetKind() {
			out.Kind = k
		}
	}
	switch {
	case out.ID == "":
		return out, fmt.Errorf("reservation without an id")
	case out.Kind == "":
		return out, fmt.Errorf("reservation %s: unknown kind %v", out.ID, r.GetKind())
	case out.Count < 0 || out.InUse < 0:
		return out, fmt.Errorf("reservation %s: negative count %d or in use %d", out.ID, out.Count, out.InUse)
	case !out.Start.IsZero() && !out.End.IsZero() && out.End.Before(out.Start):
		return out, fmt.Errorf("reservation %s: ends (%s) before it starts (%s)", out.ID, out.End.Format(time.RFC3339), out.Start.Format(time.RFC3339))
	case len(out.NodeGroups) == 0:
		return out, fmt.Errorf("reservation %s: names no node group", out.ID)
	}
	return out, nil
}

// Template serializes a template as the extension carries it.
func Template(t *cloudprovider.NodeTemplate) (*ext.NodeGroupTemplateResponse, error) {
	if t == nil || t.Node == nil {
		return &ext.NodeGroupTemplateResponse{}, nil
	}
	out := &ext.NodeGroupTemplateResponse{ResourceApiVersion: ResourceAPIVersion}
	var err error
	if out.NodeBytes, err = t.Node.Marshal(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	for _, s := range t.ResourceSlices {
		b, err := s.Marshal()
		if err != nil {
			return nil, fmt.Errorf("resource slice %s: %w", s.Name, err)
		}
		out.ResourceSliceBytes = append(out.ResourceSliceBytes, b)
	}
	for _, p := range t.Pods {
		b, err := p.Marshal()
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		out.PodBytes = append(out.PodBytes, b)
	}
	return out, nil
}

// TemplateFrom decodes and checks a template: the slices and pods must be
// the node's own (the simulator renames them per hypothetical node, which
// only works for node-local objects). Empty node bytes mean no template
// (nil, nil).
func TemplateFrom(r *ext.NodeGroupTemplateResponse) (*cloudprovider.NodeTemplate, error) {
	if len(r.GetNodeBytes()) == 0 {
		if len(r.GetResourceSliceBytes())+len(r.GetPodBytes()) > 0 {
			return nil, fmt.Errorf("template has slices or pods but no node")
		}
		return nil, nil
	}
	if len(r.GetResourceSliceBytes()) > 0 && r.GetResourceApiVersion() != ResourceAPIVersion {
		return nil, fmt.Errorf("template slices are %q, want %q", r.GetResourceApiVersion(), ResourceAPIVersion)
	}
	node, err := templateNode(r.GetNodeBytes(), "")
	if err != nil {
		return nil, err
	}
	return templateOf(node, r.GetResourceSliceBytes(), r.GetPodBytes())
}

// UpstreamTemplate serializes a template as upstream's
// NodeGroupTemplateNodeInfo carries it: the Node and, unless noSlices
// (a server built before resourceSliceBytes existed), its ResourceSlices.
// Upstream's message has no pods.
func UpstreamTemplate(t *cloudprovider.NodeTemplate, noSlices bool) (*pb.NodeGroupTemplateNodeInfoResponse, error) {
	out := &pb.NodeGroupTemplateNodeInfoResponse{}
	if t == nil || t.Node == nil {
		return out, nil
	}
	var err error
	if out.NodeBytes, err = t.Node.Marshal(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if noSlices {
		return out, nil
	}
	for _, s := range t.ResourceSlices {
		b, err := s.Marshal()
		if err != nil {
			return nil, fmt.Errorf("resource slice %s: %w", s.Name, err)
		}
		out.ResourceSliceBytes = append(out.ResourceSliceBytes, b)
	}
	return out, nil
}

// UpstreamTemplateFrom decodes and checks upstream's template: the Node
// (named name when the server left it unnamed, as upstream tolerates) and
// its resource.k8s.io/v1 slices, checked as the extension's are. No node
// bytes mean no template (nil, nil).
func UpstreamTemplateFrom(r *pb.NodeGroupTemplateNodeInfoResponse, name string) (*cloudprovider.NodeTemplate, error) {
	nodeBytes := TemplateNodeBytes(r)
	if len(nodeBytes) == 0 {
		if len(r.GetResourceSliceBytes()) > 0 {
			return nil, fmt.Errorf("template has slices but no node")
		}
		return nil, nil
	}
	node, err := templateNode(nodeBytes, name)
	if err != nil {
		return nil, err
	}
	return templateOf(node, r.GetResourceSliceBytes(), nil)
}

// templateNode decodes a template's Node; an unnamed one is named name,
// or refused when name is empty.
func templateNode(b []byte, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	if err := node.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("template node: %w", err)
	}
	if node.Name == "" {
		if name == "" {
			return nil, fmt.Errorf("template node has no name")
		}
		node.Name = name
	}
	return node, nil
}

// templateOf decodes and checks a template's slices and pods: they must be
// the node's own (the simulator renames them per hypothetical node, which
// only works for node-local objects).
func templateOf(node *corev1.Node, sliceBytes, podBytes [][]byte) (*cloudprovider.NodeTemplate, error) {
	out := &cloudprovider.NodeTemplate{Node: node}
	for i, b := range sliceBytes {
		s := &resourceapi.ResourceSlice{}
		if err := s.Unmarshal(b); err != nil {
			return nil, fmt.Errorf("template resource slice %d: %w", i, err)
		}
		if s.Spec.NodeName == nil || *s.Spec.NodeName != node.Name {
			return nil, fmt.Errorf("template resource slice %q does not name the template node %q in spec.nodeName", s.Name, node.Name)
		}
		if s.Spec.NodeSelector != nil || ptr.Deref(s.Spec.AllNodes, false) || ptr.Deref(s.Spec.PerDeviceNodeSelection, false) {
			return nil, fmt.Errorf("template resource slice %q sets nodeSelector, allNodes or perDeviceNodeSelection: a template holds its node's own slices", s.Name)
		}
		if s.Spec.Driver == "" || s.Spec.Pool.Name == "" {
			return nil, fmt.Errorf("template resource slice %q has no driver or pool", s.Name)
		}
		out.ResourceSlices = append(out.ResourceSlices, s)
	}
	if err := completePools(out.ResourceSlices); err != nil {
		return nil, err
	}
	for i, b := range podBytes {
		p := &corev1.Pod{}
		if err := p.Unmarshal(b); err != nil {
			return nil, fmt.Errorf("template pod %d: %w", i, err)
		}
		if p.Spec.NodeName != node.Name {
			return nil, fmt.Errorf("template pod %s/%s has spec.nodeName %q, not the template node %q", p.Namespace, p.Name, p.Spec.NodeName, node.Name)
		}
		out.Pods = append(out.Pods, p)
	}
	return out, nil
}

// completePools checks that each pool of a template is whole: all its
// slices of one generation, as many as its resourceSliceCount. The
// scheduler's allocator ignores the devices of an incomplete pool (and
// the older generation of a mixed one), so such a template would scale up
// nodes whose devices no pod could get.
func completePools(slices []*resourceapi.ResourceSlice) error {
	type poolKey struct{ driver, pool string }
	count := map[poolKey]int64{}
	gen := map[poolKey]int64{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if g, ok := gen[k]; ok && g != s.Spec.Pool.Generation {
			return fmt.Errorf("template pool %q of driver %s mixes generations %d and %d", k.pool, k.driver, g, s.Spec.Pool.Generation)
		}
		gen[k] = s.Spec.Pool.Generation
		count[k]++
	}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		if s.Spec.Pool.ResourceSliceCount != count[k] {
			return fmt.Errorf("template pool %q of driver %s: slice %q says the pool has %d slices, the template has %d",
				k.pool, k.driver, s.Name, s.Spec.Pool.ResourceSliceCount, count[k])
		}
	}
	return nil
}
