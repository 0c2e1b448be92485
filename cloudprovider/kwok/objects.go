package kwok

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

const (
	// ProviderName is the --cloud-provider value of this provider.
	ProviderName = "kwok"
	// LabelNodeGroup names the group a node belongs to; a restarted
	// provider finds its nodes by it.
	LabelNodeGroup = "autoscaling.dra-autoscaler.io/node-group"
	// LabelCapacityType says how the node is bought (on-demand, spot,
	// reserved), for scale-down ordering and reporting.
	LabelCapacityType = "autoscaling.dra-autoscaler.io/capacity-type"
	// AnnotationKwokNode marks nodes for the kwok controller, started with
	// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake.
	AnnotationKwokNode = "kwok.x-k8s.io/node"

	providerIDPrefix = "kwok://"
	// defaultPods is the kubelet's default max-pods, used when the
	// template's capacity does not say: a node without a pods capacity
	// would take no pods at all.
	defaultPods = 110
	// Devices per slice: the API's limit for slices using counters,
	// taints or other advanced fields, so that any device list fits.
	maxDevicesPerSlice     = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
	maxCounterSetsPerSlice = resourceapi.ResourceSliceMaxCounterSets
)

// providerID is the node.spec.providerID of a node of group.
func providerID(group, node string) string {
	return providerIDPrefix + group + "/" + node
}

// parseProviderID splits a kwok providerID into group and node name.
func parseProviderID(id string) (group, node string, ok bool) {
	rest, found := strings.CutPrefix(id, providerIDPrefix)
	if !found {
		return "", "", false
	}
	group, node, ok = strings.Cut(rest, "/")
	return group, node, ok && group != "" && node != ""
}

// templateNodeName is the placeholder name of a group's template node.
func templateNodeName(group string) string {
	return group + "-template"
}

func (g *NodeGroupConfig) capacityType() CapacityType {
	if g.CapacityType == "" {
		return CapacityOnDemand
	}
	return g.CapacityType
}

// nodeLabels are the labels a node of the group registers with: the
// kubelet's os and arch defaults, then the template's, the topology values,
// and the hostname and the provider's own (which the template may not set).
func (g *NodeGroupConfig) nodeLabels(nodeName string) map[string]string {
	labels := map[string]string{
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: "amd64",
	}
	for k, v := range g.Template.Labels {
		labels[k] = v
	}
	for k, v := range g.Topology {
		labels[k] = v
	}
	labels[corev1.LabelHostname] = nodeName
	labels[LabelNodeGroup] = g.Name
	labels[LabelCapacityType] = string(g.capacityType())
	return labels
}

// buildNode returns the Node a group's instance registers as. Conditions,
// addresses and node info are left to the kwok controller, as a kubelet
// would fill them.
func (g *NodeGroupConfig) buildNode(name string) *corev1.Node {
	annotations := map[string]string{}
	for k, v := range g.Template.Annotations {
		annotations[k] = v
	}
	if _, ok := annotations[AnnotationKwokNode]; !ok {
		// The template may name another kwok controller (one per
		// simulated zone, say); "fake" is the one every demo runs.
		annotations[AnnotationKwokNode] = "fake"
	}

	capacity := corev1.ResourceList{}
	for k, v := range g.Template.Capacity {
		capacity[k] = v.DeepCopy()
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = *resource.NewQuantity(defaultPods, resource.DecimalSI)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      g.nodeLabels(name),
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{ProviderID: providerID(g.Name, name)},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
		},
	}
	for _, t := range g.Template.Taints {
		node.Spec.Taints = append(node.Spec.Taints, *t.DeepCopy())
	}
	return node
}

// buildInstanceNode is buildNode with the instance's faults applied. A
// never-Ready node lacks the kwok annotation, so that no kwok controller
// takes it over, and registers NotReady and tainted, as the kubelet of a
// node that fails its checks would report it.
func (g *NodeGroupConfig) buildInstanceNode(name string, f instanceFaults, domain string) *corev1.Node {
	node := g.buildNode(name)
	for _, k := range g.PerRequestTopology {
		node.Labels[k] = domain
	}
	if !f.NeverReady {
		return node
	}
	delete(node.Annotations, AnnotationKwokNode)
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	node.Status.Conditions = []corev1.NodeCondition{{
		Type:    corev1.NodeReady,
		Status:  corev1.ConditionFalse,
		Reason:  "KubeletNotReady",
		Message: "injected fault: the node never becomes Ready (faults.neverReady)",
	}}
	return node
}

// buildTemplateNode is buildNode under the placeholder name, Ready as the
// node will be once kwok has taken it over, and without a providerID: no
// instance stands behind it.
func (g *NodeGroupConfig) buildTemplateNode() *corev1.Node {
	node := g.buildNode(templateNodeName(g.Name))
	node.Spec.ProviderID = ""
	if len(g.PerRequestTopology) > 0 {
		node.Annotations[cloudprovider.AnnotationTopologyPerRequest] = strings.Join(g.PerRequestTopology, ",")
	}
	if n := g.unitSize(); n > 1 {
		node.Annotations[cloudprovider.AnnotationUnitSize] = strconv.Itoa(n)
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type:   corev1.NodeReady,
		Status: corev1.ConditionTrue,
		Reason: "KubeletReady",
	}}
	return node
}

// sanitizeDriver makes a driver name usable inside an object name:
// anything but lower-case letters, digits and '-' becomes '-'.
func sanitizeDriver(driver string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, driver)
}

// sliceName names the i-th slice a driver publishes for a node.
func sliceName(node, driver string, i int) string {
	return fmt.Sprintf("%s-%s-%d", node, sanitizeDriver(driver), i)
}

// buildSlices returns the ResourceSlices the group's drivers publish for a
// node: per driver one pool named after the node, its counter sets first in
// slices of their own (the API allows counters and devices in one slice
// only without each other), then the devices in chunks the API accepts.
func (g *NodeGroupConfig) buildSlices(nodeName string) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, d := range g.Template.Drivers {
		var parts []resourceapi.ResourceSliceSpec
		for start := 0; start < len(d.SharedCounters); start += maxCounterSetsPerSlice {
			end := min(start+maxCounterSetsPerSlice, len(d.SharedCounters))
			spec := resourceapi.ResourceSliceSpec{}
			for _, cs := range d.SharedCounters[start:end] {
				spec.SharedCounters = append(spec.SharedCounters, *cs.DeepCopy())
			}
			parts = append(parts, spec)
		}
		for start := 0; start < len(d.Devices); start += maxDevicesPerSlice {
			end := min(start+maxDevicesPerSlice, len(d.Devices))
			spec := resourceapi.ResourceSliceSpec{}
			for _, dev := range d.Devices[start:end] {
				spec.Devices = append(spec.Devices, *dev.DeepCopy())
			}
			parts = append(parts, spec)
		}
		for i, spec := range parts {
			spec.Driver = d.Driver
			spec.NodeName = ptr.To(nodeName)
			spec.Pool = resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: int64(len(parts))}
			out = append(out, &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: sliceName(nodeName, d.Driver, i)},
				Spec:       spec,
			})
		}
	}
	return out
}

// AttributeUUID is the attribute an instance's every device carries, in
// its driver's domain: a value of its own, as real drivers publish a GPU's
// uuid or a NIC's address, which no template knows and no selector of
// the autoscaler's tests reads.
const AttributeUUID resourceapi.QualifiedName = "uuid"

// instanceSlices are the slices an instance's drivers publish: the
// template's (buildSlices), each device given an AttributeUUID of its
// own unless the configuration gives it one or it has no room left for
// it (the API's limit on a device's attributes and capacities).
func (g *NodeGroupConfig) instanceSlices(nodeName string) []*resourceapi.ResourceSlice {
	out := g.buildSlices(nodeName)
	for _, s := range out {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			if _, ok := d.Attributes[AttributeUUID]; ok || len(d.Attributes)+len(d.Capacity) >= resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
				continue
			}
			if d.Attributes == nil {
				d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
			}
			d.Attributes[AttributeUUID] = resourceapi.DeviceAttribute{StringValue: ptr.To(deviceUUID(nodeName, s.Spec.Driver, d.Name))}
		}
	}
	return out
}

// deviceUUID is a stable, uuid-shaped name of one device of one node.
func deviceUUID(node, driver, device string) string {
	sum := sha256.Sum256([]byte(node + "/" + driver + "/" + device))
	h := hex.EncodeToString(sum[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// sliceNames are the names of the slices buildSlices returns, in order,
// without building them: adopting thousands of nodes checks names only.
func (g *NodeGroupConfig) sliceNames(nodeName string) []string {
	var out []string
	for _, d := range g.Template.Drivers {
		parts := (len(d.SharedCounters)+maxCounterSetsPerSlice-1)/maxCounterSetsPerSlice +
			(len(d.Devices)+maxDevicesPerSlice-1)/maxDevicesPerSlice
		for i := range parts {
			out = append(out, sliceName(nodeName, d.Driver, i))
		}
	}
	return out
}

// publishedSlices are the slices an instance's drivers actually publish.
// With the incompletePool fault each driver's pool announces one slice
// more than it publishes, so that consumers see the pool as incomplete
// (resource.k8s.io/v1: fewer slices of the generation than
// resourceSliceCount) and allocate nothing from it: the last slice of a
// pool of several (its devices, after the counters) is left out, and a
// pool of one says it has two.
func (g *NodeGroupConfig) publishedSlices(nodeName string, f instanceFaults) []*resourceapi.ResourceSlice {
	all := g.instanceSlices(nodeName)
	if !f.IncompletePool {
		return all
	}
	var out []*resourceapi.ResourceSlice
	for start := 0; start < len(all); {
		end := start + 1
		for end < len(all) && all[end].Spec.Driver == all[start].Spec.Driver {
			end++
		}
		pool := all[start:end]
		if len(pool) > 1 {
			pool = pool[:len(pool)-1]
		} else {
			pool[0].Spec.Pool.ResourceSliceCount = 2
		}
		out = append(out, pool...)
		start = end
	}
	return out
}

// buildCSINode is the CSINode the node's kubelet registers for its CSI
// drivers; nil when it has none.
func (g *NodeGroupConfig) buildCSINode(name string) *storagev1.CSINode {
	if len(g.Template.CSIDrivers) == 0 {
		return nil
	}
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, d := range g.Template.CSIDrivers {
		drv := storagev1.CSINodeDriver{Name: d.Name, NodeID: name, TopologyKeys: d.TopologyKeys}
		if d.MaxVolumes != nil {
			drv.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(*d.MaxVolumes)}
		}
		n.Spec.Drivers = append(n.Spec.Drivers, drv)
	}
	return n
}
