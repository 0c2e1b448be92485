// Package template turns node groups into hypothetical nodes: a template
// (cloudprovider.NodeTemplate) is built from a real healthy node of a group
// (FromNode) or declared by the cloud provider, completed with the
// DaemonSet pods the real scheduler would place there (DaemonSetPods), and
// instantiated under unique names (Instantiate) each time the simulator
// needs one more node of the group.
package template

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
)

// PlaceholderNodeName is the name and hostname of every node template built
// by FromNode. Instantiate replaces it (and pools named after it) with the
// hypothetical node's own name.
const PlaceholderNodeName = "template-node"

// Taints the cluster autoscaler puts on nodes it is about to remove. A new
// node never carries them. The names are the upstream cluster autoscaler's,
// so that both autoscalers understand each other's marks.
const (
	TaintToBeDeleted       = "ToBeDeletedByClusterAutoscaler"
	TaintDeletionCandidate = "DeletionCandidateOfClusterAutoscaler"
)

// FromNode builds a template from a real node of a group, as a new node of
// that group would look once registered: identity (uid, resourceVersion,
// creation time, providerID, addresses, pod CIDRs) dropped, name and
// hostname set to PlaceholderNodeName, schedulable, Ready, without the
// lifecycle taints of this particular node (node.kubernetes.io/*, the cloud
// provider's uninitialized/shutdown taints, the autoscalers' deletion
// marks). Only the node-local ResourceSlices are kept (slices for all
// nodes or selected nodes are not published by the node's drivers); a
// slice of another node is an error, since the caller mixed nodes up. Only
// pods that would start by themselves on a new node are kept: DaemonSet
// pods and mirror (static) pods, reset to unbound-but-placed copies without
// uid or status. The inputs are not modified.
func FromNode(node *v1.Node, resourceSlices []*resourceapi.ResourceSlice, pods []*v1.Pod) (*cloudprovider.NodeTemplate, error) {
	if node == nil {
		return nil, fmt.Errorf("node template: nil node")
	}
	if node.Name == "" {
		return nil, fmt.Errorf("node template: node without a name")
	}
	t := &cloudprovider.NodeTemplate{Node: sanitiseNode(node)}
	for _, s := range resourceSlices {
		if s == nil {
			continue
		}
		switch nodeName := ptr.Deref(s.Spec.NodeName, ""); nodeName {
		case node.Name:
			t.ResourceSlices = append(t.ResourceSlices, sanitiseSlice(s, node.Name))
		case "":
			// Network-attached or multi-node devices: published once for
			// the cluster, not by a new node's drivers.
		default:
			return nil, fmt.Errorf("node template from %s: resource slice %s belongs to node %s", node.Name, s.Name, nodeName)
		}
	}
	// A stable slice order makes instantiated slice names (<node>-<i>)
	// and every simulation built on them repeatable.
	slices.SortFunc(t.ResourceSlices, func(a, b *resourceapi.ResourceSlice) int {
		return cmp.Or(cmp.Compare(a.Spec.Driver, b.Spec.Driver),
			cmp.Compare(a.Spec.Pool.Name, b.Spec.Pool.Name), cmp.Compare(a.Name, b.Name))
	})
	for i, s := range t.ResourceSlices {
		s.Name = fmt.Sprintf("%s-%d", PlaceholderNodeName, i)
	}
	seen := map[string]bool{}
	for _, p := range pods {
		if p == nil || !StartsByItself(p) || isTerminal(p) {
			continue
		}
		if p.Spec.NodeName != node.Name {
			return nil, fmt.Errorf("node template from %s: pod %s/%s is bound to node %q", node.Name, p.Namespace, p.Name, p.Spec.NodeName)
		}
		sp := sanitisePod(p, node.Name)
		// Two pods of one DaemonSet (during a surge update) are one on a
		// new node.
		if key := sp.Namespace + "/" + sp.Name; !seen[key] {
			seen[key] = true
			t.Pods = append(t.Pods, sp)
		}
	}
	slices.SortFunc(t.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return t, nil
}

// sanitiseNode returns a copy of node as a freshly registered node of its
// group would look.
func sanitiseNode(node *v1.Node) *v1.Node {
	in := node.DeepCopy()
	out := &v1.Node{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:        PlaceholderNodeName,
			Labels:      in.Labels,
			Annotations: in.Annotations,
		},
		Spec:   in.Spec,
		Status: in.Status,
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[v1.LabelHostname] = PlaceholderNodeName
	out.Spec.ProviderID = ""
	out.Spec.PodCIDR, out.Spec.PodCIDRs = "", nil
	out.Spec.Unschedulable = false
	out.Spec.Taints = slices.DeleteFunc(out.Spec.Taints, func(t v1.Taint) bool { return isLifecycleTaint(t.Key) })
	if len(out.Spec.Taints) == 0 {
		out.Spec.Taints = nil
	}
	// Pressure and other conditions describe this node's past; a new node
	// starts Ready. Anything else the scheduler reads about a node
	// (capacity, allocatable, node info, declared features, runtime
	// handlers) is the group's and stays.
	out.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}}
	out.Status.Phase = ""
	out.Status.Addresses = nil
	out.Status.Images = nil
	out.Status.VolumesInUse = nil
	out.Status.VolumesAttached = nil
	out.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{}
	return out
}

// isLifecycleTaint reports taints that describe one node's state rather
// than its group: node conditions and lifecycle (node.kubernetes.io/*),
// cloud initialisation and shutdown, and the autoscalers' deletion marks.
func isLifecycleTaint(key string) bool {
	switch key {
	case TaintToBeDeleted, TaintDeletionCandidate,
		"node.cloudprovider.kubernetes.io/uninitialized", "node.cloudprovider.kubernetes.io/shutdown":
		return true
	}
	return strings.HasPrefix(key, "node.kubernetes.io/")
}

// sanitiseSlice returns a copy of a node-local slice re-homed on the
// placeholder node; a pool named after the node is renamed with it, so that
// Instantiate knows it is the node's own pool.
func sanitiseSlice(s *resourceapi.ResourceSlice, nodeName string) *resourceapi.ResourceSlice {
	out := &resourceapi.ResourceSlice{
		TypeMeta:   s.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Labels: s.Labels, Annotations: s.Annotations},
		Spec:       s.Spec,
	}
	out = out.DeepCopy()
	out.Spec.NodeName = ptr.To(PlaceholderNodeName)
	if out.Spec.Pool.Name == nodeName {
		out.Spec.Pool.Name = PlaceholderNodeName
	}
	return out
}

// HideIdentities replaces, in a template made from a node, the values of
// the attributes that tell devices apart (identities, by short name:
// attrreads.Identities, a GPU's uuid) with ones no real device has: a new
// node's devices get identities of their own, unknown until it
// registers, and a pod asking for one device by its identity must not be
// planned a new node for. The attribute stays (a selector asking whether
// it is there still finds it). String values only: others are left.
func HideIdentities(t *cloudprovider.NodeTemplate, identities map[string]bool) {
	if t == nil || len(identities) == 0 {
		return
	}
	for _, s := range t.ResourceSlices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			for key, a := range d.Attributes {
				if a.StringValue == nil || !identities[attrreads.Short(key)] {
					continue
				}
				a.StringValue = ptr.To(HiddenIdentity + s.Spec.Pool.Name + "/" + d.Name)
				d.Attributes[key] = a // the template's own copy (sanitiseSlice)
			}
		}
	}
}

// HiddenIdentity starts the values HideIdentities gives.
const HiddenIdentity = "unknown-until-registered:"

// StartsByItself reports pods a new node runs without any scheduling
// decision of ours: DaemonSet pods (the controller creates one per
// matching node) and mirror pods of static pods (the kubelet starts them
// from its manifests).
func StartsByItself(p *v1.Pod) bool {
	if _, ok := p.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return true
	}
	owner := metav1.GetControllerOfNoCopy(p)
	return owner != nil && owner.Kind == "DaemonSet"
}

func isTerminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

// sanitisePod returns an unbound-but-placed copy of a pod: what the pod
// would be on a new node before anything ran it. Per-node parts of its
// name go (a mirror pod's node suffix, a generated suffix, so that
// instances are named "<ds>-<node>" like DaemonSetPods' pods), and the
// node-name affinity the DaemonSet controller pins its pods with moves to
// the placeholder.
func sanitisePod(p *v1.Pod, nodeName string) *v1.Pod {
	in := p.DeepCopy()
	if _, mirror := in.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		in.Name = strings.TrimSuffix(in.Name, "-"+nodeName)
	} else if in.GenerateName != "" && strings.HasPrefix(in.Name, in.GenerateName) {
		in.Name = strings.TrimSuffix(in.GenerateName, "-")
	}
	if a := in.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, req := range term.MatchFields {
				if req.Key == metav1.ObjectNameField {
					for i := range req.Values {
						if req.Values[i] == nodeName {
							req.Values[i] = PlaceholderNodeName
						}
					}
				}
			}
		}
	}
	return &v1.Pod{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       in.Namespace,
			Name:            in.Name,
			Labels:          in.Labels,
			Annotations:     in.Annotations,
			OwnerReferences: in.OwnerReferences,
		},
		Spec: func() v1.PodSpec {
			spec := in.Spec
			spec.NodeName = PlaceholderNodeName
			return spec
		}(),
	}
}

// CSINodeOf is the template of a real node's CSINode: its drivers and
// attach limits, under the placeholder name, without the node's IDs.
func CSINodeOf(n *storagev1.CSINode) *storagev1.CSINode {
	if n == nil || len(n.Spec.Drivers) == 0 {
		return nil
	}
	out := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: PlaceholderNodeName}}
	for _, d := range n.Spec.Drivers {
		d = *d.DeepCopy()
		d.NodeID = PlaceholderNodeName
		out.Spec.Drivers = append(out.Spec.Drivers, d)
	}
	return out
}
