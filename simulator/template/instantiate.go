package template

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Instantiate returns a hypothetical node of the template named name, with
// its ResourceSlices and pods:
//   - the node gets name as name and hostname label, and a UID derived
//     from the name (deterministic, unique per name);
//   - slice i is named "<name>-<i>" and published for the node; a pool
//     named after the template node is named after the new node, any other
//     pool P becomes "<name>/P" (node names cannot contain "/", so pools of
//     two hypothetical nodes never collide and the DRA allocator, which
//     pins an allocation to one node, sees each node's own devices);
//     devices, counters and attributes are the template's, but for
//     attributes the provider fills per request (a LaunchValue), which
//     take the node's value of the label they name;
//   - pod P is named "P-<name>", bound to the node, with a fresh UID.
//
// The simulator calls this for every hypothetical node, so it copies only
// what changes: the returned objects share devices, counters, capacity,
// labels of slices and pods and pod specs' inner fields with the template.
// Like everything stored in the snapshot they must be treated as read-only,
// and the template must not change while they are in use. A nil template
// (or one without a node) yields nothing.
func Instantiate(t *cloudprovider.NodeTemplate, name string) (*v1.Node, []*resourceapi.ResourceSlice, []*v1.Pod) {
	node, slices := instantiateNode(t, name)
	if node == nil {
		return nil, nil, nil
	}
	return node, slices, instantiatePods(t, name)
}

// instantiateNode is Instantiate's node and slices.
func instantiateNode(t *cloudprovider.NodeTemplate, name string) (*v1.Node, []*resourceapi.ResourceSlice) {
	if t == nil || t.Node == nil {
		return nil, nil
	}
	node := *t.Node
	node.Name = name
	node.UID = hypotheticalUID("node", "", name)
	node.Labels = make(map[string]string, len(t.Node.Labels)+1)
	for k, v := range t.Node.Labels {
		node.Labels[k] = v
	}
	node.Labels[v1.LabelHostname] = name

	var slices []*resourceapi.ResourceSlice
	if len(t.ResourceSlices) > 0 {
		from := t.ResourceSlices
		if _, ok := t.Node.Annotations[cloudprovider.AnnotationTopologyPerRequest]; ok {
			from = cloudprovider.FillLaunchValues(from, func(label string) string { return launchValue(&node, label) })
		}
		slices = make([]*resourceapi.ResourceSlice, len(from))
		// One backing array for all copies: a single allocation per node.
		copies := make([]resourceapi.ResourceSlice, len(from))
		nodeName := name
		for i, s := range from {
			c := &copies[i]
			*c = *s
			c.Name = fmt.Sprintf("%s-%d", name, i)
			c.UID = hypotheticalUID("resourceslice", "", c.Name)
			c.Spec.NodeName = &nodeName
			c.Spec.Pool.Name = PoolName(t.Node.Name, s.Spec.Pool.Name, name)
			slices[i] = c
		}
	}
	return &node, slices
}

// instantiatePods is Instantiate's pods.
func instantiatePods(t *cloudprovider.NodeTemplate, name string) []*v1.Pod {
	var pods []*v1.Pod
	if len(t.Pods) > 0 {
		pods = make([]*v1.Pod, len(t.Pods))
		copies := make([]v1.Pod, len(t.Pods))
		for i, p := range t.Pods {
			c := &copies[i]
			*c = *p
			c.Name = p.Name + "-" + name
			c.UID = hypotheticalUID("pod", p.Namespace, c.Name)
			c.Spec.NodeName = name
			pods[i] = c
		}
	}
	return pods
}

// launchValue is the value a device attribute naming label as a launch
// value (cloudprovider.LaunchValue) gets on node: the node's own when it
// has one (the cycle's new domain, a booting unit's), else one no other
// node has, as the provider will pick a fresh one.
func launchValue(node *v1.Node, label string) string {
	if v, ok := node.Labels[label]; ok {
		return v
	}
	return "picked at launch of " + node.Name
}

// PoolName is the name a template pool gets on the hypothetical node
// nodeName: see Instantiate.
func PoolName(templateNode, pool, nodeName string) string {
	if pool == templateNode {
		return nodeName
	}
	return nodeName + "/" + pool
}

// hypotheticalUID marks objects that exist only in the simulation.
func hypotheticalUID(kind, namespace, name string) types.UID {
	if namespace == "" {
		return types.UID("hypothetical-" + kind + "-" + name)
	}
	return types.UID("hypothetical-" + kind + "-" + namespace + "-" + name)
}

// WithLaunchLabels is t for a node of one request (or unit) of its group
// that the planner opens: each label the provider picks per request and t
// leaves unset (cloudprovider.AnnotationTopologyPerRequest) gets value,
// so that a pod that only needs some value (affinity naming the label, a
// ComputeDomain's pods following each other) may go there, and the
// devices carrying it (LaunchValue) carry it too. t itself when it has no
// such label. value must be one no other request has.
func WithLaunchLabels(t *cloudprovider.NodeTemplate, value string) *cloudprovider.NodeTemplate {
	var out *cloudprovider.NodeTemplate
	for _, l := range t.PerRequestLabels() {
		if !t.TopologyPerRequest(l) {
			continue
		}
		if out == nil {
			c := *t
			n := *t.Node
			n.Labels = maps.Clone(t.Node.Labels)
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			c.Node = &n
			out = &c
		}
		out.Node.Labels[l] = value
	}
	if out == nil {
		return t
	}
	return out
}
