package cloudprovider

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// NodeTemplate is what a new node of a group would look like once it has
// registered and its DRA drivers have published their devices. The
// simulator instantiates it under unique names: a node-local pool and its
// slices are renamed per hypothetical node, so every allocation pins to one
// node, as the real allocator's node selector requires.
type NodeTemplate struct {
	// Node is the Node object as the kubelet would register it (labels,
	// taints, capacity and allocatable), with a placeholder name.
	Node *corev1.Node
	// ResourceSlices are the node-local slices its drivers would publish,
	// with spec.nodeName equal to Node.Name.
	ResourceSlices []*resourceapi.ResourceSlice
	// Pods are the pods that would start on the node by themselves
	// (DaemonSet pods, static pods), with spec.nodeName equal to Node.Name.
	Pods []*corev1.Pod
	// CSINode is what its kubelet would register for the node's CSI
	// drivers (names and attach limits), named like Node; nil when the
	// node runs none. The volume-limit plugin judges new nodes by it.
	CSINode *storagev1.CSINode
}

// DeepCopy copies the template and everything in it.
func (t *NodeTemplate) DeepCopy() *NodeTemplate {
	if t == nil {
		return nil
	}
	out := &NodeTemplate{Node: t.Node.DeepCopy(), CSINode: t.CSINode.DeepCopy()}
	for _, s := range t.ResourceSlices {
		out.ResourceSlices = append(out.ResourceSlices, s.DeepCopy())
	}
	for _, p := range t.Pods {
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	return out
}

// AnnotationTopologyPerRequest, on a template's Node, lists (comma
// separated) the topology labels whose value the provider chooses when it
// launches nodes: every node of one atomic request gets one fresh value
// (a placement group, a capacity block, a rack the cloud picks), never a
// value earlier nodes have. The template itself carries no value for
// them. Any provider may set it (docs/gangs.md).
const AnnotationTopologyPerRequest = "autoscaling.dra-autoscaler.io/topology-per-request"

// AnnotationUnitSize, on a template's Node, is the group's unit size N
// (issue 41, docs/design/units-of-scale.md): its nodes come and go N at a
// time, in requests of whole units, and each unit is one request as far
// as AnnotationTopologyPerRequest goes (its N nodes share one fresh
// value; two units never share one). Absent: 1, every node alone. Any
// provider may set it.
const AnnotationUnitSize = "autoscaling.dra-autoscaler.io/unit-size"

// UnitSize is the template's unit size (AnnotationUnitSize): 1 when unset.
// A value that is not a positive integer is an error, for the provider to
// refuse the group with.
func (t *NodeTemplate) UnitSize() (int, error) {
	if t == nil || t.Node == nil {
		return 1, nil
	}
	v, ok := t.Node.Annotations[AnnotationUnitSize]
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 1, fmt.Errorf("annotation %s=%q: want a positive integer", AnnotationUnitSize, v)
	}
	return n, nil
}

// Units is n nodes rounded up to whole units of the template's size.
func (t *NodeTemplate) Units(n int) int {
	size, err := t.UnitSize()
	if err != nil || size <= 1 {
		return n
	}
	return (n + size - 1) / size * size
}

// KeepLaunchChoices makes t, a template read off a running node of a
// group, say what the group's provider decides per launch as from, the
// provider's own template, says it: the unit size and the per-request
// labels, whose values on the node are that node's request's, not the
// group's (left on t, a later request would be planned into that
// node's domain). Device attributes holding the node's value of such a
// label become its LaunchValue, for the same reason.
func (t *NodeTemplate) KeepLaunchChoices(from *NodeTemplate) {
	if t == nil || t.Node == nil || from == nil || from.Node == nil {
		return
	}
	for _, a := range []string{AnnotationTopologyPerRequest, AnnotationUnitSize} {
		v, ok := from.Node.Annotations[a]
		if !ok {
			continue
		}
		if t.Node.Annotations == nil {
			t.Node.Annotations = map[string]string{}
		}
		t.Node.Annotations[a] = v
	}
	var values map[string]string
	for _, k := range t.PerRequestLabels() {
		if v := t.Node.Labels[k]; v != "" {
			if values == nil {
				values = map[string]string{}
			}
			values[v] = k
		}
		delete(t.Node.Labels, k)
	}
	markLaunchValues(t.ResourceSlices, values)
}

// UnitOf names the unit node belongs to in a group of units: the values
// its provider chose per unit for the template's per-request labels
// (nodes with equal names are one unit). "" when the template has no
// units. Without per-request labels units cannot be told apart, and every
// node of the group is named alike: the group then counts as one unit,
// which only goes whole.
func (t *NodeTemplate) UnitOf(node *corev1.Node) string {
	if n, _ := t.UnitSize(); n <= 1 || node == nil {
		return ""
	}
	var parts []string
	for _, k := range t.PerRequestLabels() {
		parts = append(parts, k+"="+node.Labels[k])
	}
	if len(parts) == 0 {
		return "the group"
	}
	return strings.Join(parts, ",")
}

// PerRequestLabels are the labels AnnotationTopologyPerRequest lists, in
// its order, whether or not the template also fixes them.
func (t *NodeTemplate) PerRequestLabels() []string {
	if t == nil || t.Node == nil {
		return nil
	}
	var out []string
	for k := range strings.SplitSeq(t.Node.Annotations[AnnotationTopologyPerRequest], ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// TopologyPerRequest reports whether the template's provider chooses a
// fresh value of label per request (AnnotationTopologyPerRequest); a
// label the template fixes a value for is never chosen per request.
func (t *NodeTemplate) TopologyPerRequest(label string) bool {
	if t == nil || t.Node == nil {
		return false
	}
	if _, fixed := t.Node.Labels[label]; fixed {
		return false
	}
	return slices.Contains(t.PerRequestLabels(), label)
}
