package builder

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBuilder builds a corev1.Node. A new node is Ready, schedulable and has
// 32 CPUs, 128Gi of memory and room for 110 pods unless told otherwise.
type NodeBuilder struct {
	node corev1.Node
}

// Node starts a Node named name, labelled with kubernetes.io/hostname=name as
// the kubelet would label it.
func Node(name string) *NodeBuilder {
	b := &NodeBuilder{node: corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			UID:    uidFor("node", "", name),
			Labels: map[string]string{corev1.LabelHostname: name},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{},
			Allocatable: corev1.ResourceList{},
			Conditions: []corev1.NodeCondition{{
				Type:   corev1.NodeReady,
				Status: corev1.ConditionTrue,
			}},
		},
	}}
	return b.CPU("32").Memory("128Gi").Pods(110)
}

// Label sets one label.
func (b *NodeBuilder) Label(key, value string) *NodeBuilder {
	b.node.Labels[key] = value
	return b
}

// Labels sets several labels, keeping the ones already set.
func (b *NodeBuilder) Labels(labels map[string]string) *NodeBuilder {
	for k, v := range labels {
		b.node.Labels[k] = v
	}
	return b
}

// Annotation sets one annotation.
func (b *NodeBuilder) Annotation(key, value string) *NodeBuilder {
	if b.node.Annotations == nil {
		b.node.Annotations = map[string]string{}
	}
	b.node.Annotations[key] = value
	return b
}

// Taint adds a node taint.
func (b *NodeBuilder) Taint(key, value string, effect corev1.TaintEffect) *NodeBuilder {
	b.node.Spec.Taints = append(b.node.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return b
}

// Unschedulable cordons the node.
func (b *NodeBuilder) Unschedulable() *NodeBuilder {
	b.node.Spec.Unschedulable = true
	return b
}

// NotReady flips the Ready condition to False.
func (b *NodeBuilder) NotReady() *NodeBuilder {
	b.node.Status.Conditions[0].Status = corev1.ConditionFalse
	return b
}

// CPU sets CPU capacity and allocatable, e.g. "8" or "7500m".
func (b *NodeBuilder) CPU(q string) *NodeBuilder {
	return b.Resource(corev1.ResourceCPU, q)
}

// Memory sets memory capacity and allocatable, e.g. "32Gi".
func (b *NodeBuilder) Memory(q string) *NodeBuilder {
	return b.Resource(corev1.ResourceMemory, q)
}

// Pods sets how many pods the node takes (capacity and allocatable).
func (b *NodeBuilder) Pods(n int64) *NodeBuilder {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	b.node.Status.Capacity[corev1.ResourcePods] = q
	b.node.Status.Allocatable[corev1.ResourcePods] = q
	return b
}

// Resource sets capacity and allocatable of any resource, extended resources
// (nvidia.com/gpu) included.
func (b *NodeBuilder) Resource(name corev1.ResourceName, q string) *NodeBuilder {
	b.node.Status.Capacity[name] = quantity(q)
	b.node.Status.Allocatable[name] = quantity(q)
	return b
}

// Allocatable overrides only the allocatable amount of a resource, for nodes
// whose system reservations make allocatable smaller than capacity.
func (b *NodeBuilder) Allocatable(name corev1.ResourceName, q string) *NodeBuilder {
	b.node.Status.Allocatable[name] = quantity(q)
	return b
}

// Obj returns a copy of the node built so far.
func (b *NodeBuilder) Obj() *corev1.Node {
	return b.node.DeepCopy()
}
