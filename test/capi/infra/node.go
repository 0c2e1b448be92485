package infra

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

// NodeLabel on a ResourceSlice names the Node it was published for.
const NodeLabel = Group + "/node"

func (c *Controller) ensureNode(ctx context.Context, u *unstructured.Unstructured, spec MachineSpec, notReady bool) error {
	return c.applyNode(ctx, u.GetUID(), u.GetName(), spec, notReady)
}

// applyNode creates the Node and its ResourceSlices unless the Node exists.
// A Node of that name that is not ours is an error, never taken over. If a
// slice cannot be made, the Node goes again, so the retry starts whole.
func (c *Controller) applyNode(ctx context.Context, owner types.UID, name string, spec MachineSpec, notReady bool) error {
	existing, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && existing.Labels[OwnerLabel] == string(owner):
		return nil
	case err == nil:
		return fmt.Errorf("node %s exists and belongs to someone else (%s=%q)", name, OwnerLabel, existing.Labels[OwnerLabel])
	case !apierrors.IsNotFound(err):
		return err
	}
	node := BuildNode(name, string(owner), spec, c.opts.KubeletVersion, notReady)
	created, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	for _, slice := range BuildSlices(created, spec) {
		if _, err := c.kube.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			_ = c.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			return fmt.Errorf("node %s: creating ResourceSlice %s: %w", name, slice.Name, err)
		}
	}
	return nil
}

// BuildNode is the Node a machine becomes: kwok keeps it Ready (unless
// notReady: then nothing heartbeats it and it stays NotReady).
func BuildNode(name, owner string, spec MachineSpec, defaultKubelet string, notReady bool) *corev1.Node {
	info := nodeInfo(spec)
	labels := map[string]string{
		corev1.LabelHostname: name, corev1.LabelArchStable: info.Architecture, corev1.LabelOSStable: info.OperatingSystem,
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[OwnerLabel] = owner
	kubelet := spec.KubeletVersion
	if kubelet == "" {
		kubelet = defaultKubelet
	}
	capacity := spec.Capacity.DeepCopy()
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{}},
		Spec:       corev1.NodeSpec{ProviderID: spec.ProviderID, Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet, Architecture: info.Architecture, OperatingSystem: info.OperatingSystem},
		},
	}
	if notReady {
		now := metav1.Now()
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			Reason: "KubeletNotReady", Message: "dev infrastructure: NeverReady fault", LastHeartbeatTime: now, LastTransitionTime: now}}
	} else {
		node.Annotations[controlplane.KwokNodeAnnotation] = controlplane.KwokNodeAnnotationValue
	}
	return node
}

// BuildSlices are the node's ResourceSlices, as its DRA drivers would
// publish them: owned by the Node (so they go with it), one pool per driver
// and pool name with its slice count, generation 1.
func BuildSlices(node *corev1.Node, spec MachineSpec) []*resourceapi.ResourceSlice {
	type poolKey struct{ driver, pool string }
	count := map[poolKey]int64{}
	specs := make([]resourceapi.ResourceSliceSpec, len(spec.ResourceSlices))
	for i, s := range spec.ResourceSlices {
		s = *s.DeepCopy()
		if s.NodeName == nil && s.NodeSelector == nil && s.AllNodes == nil && s.PerDeviceNodeSelection == nil {
			// A node-local pool is the node's: its name starts with the
			// node's, as a driver's pool does, so nodes never share one.
			s.NodeName = ptr.To(node.Name)
			s.Pool.Name = strings.TrimSuffix(node.Name+"-"+s.Pool.Name, "-")
		}
		count[poolKey{s.Driver, s.Pool.Name}]++
		specs[i] = s
	}
	out := make([]*resourceapi.ResourceSlice, len(specs))
	for i, s := range specs {
		s.Pool.Generation = 1
		s.Pool.ResourceSliceCount = count[poolKey{s.Driver, s.Pool.Name}]
		out[i] = &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("%s-%d", node.Name, i),
				Labels: map[string]string{OwnerLabel: node.Labels[OwnerLabel], NodeLabel: node.Name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
					Controller: ptr.To(true)}},
			},
			Spec: s,
		}
	}
	return out
}

// deleteNodeOf deletes every Node and ResourceSlice of an owner.
func (c *Controller) deleteNodeOf(ctx context.Context, owner string) error {
	return c.deleteNodes(ctx, OwnerLabel+"="+owner)
}

func (c *Controller) deleteNodes(ctx context.Context, selector string) error {
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if err := c.kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	slices, err := c.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	for _, s := range slices.Items {
		if err := c.kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
