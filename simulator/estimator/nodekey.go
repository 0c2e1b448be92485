package estimator

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// NodeKeys tells existing nodes apart by what the filters read of them
// for a keyable, memoizable pod: two nodes with the same key give such a
// pod the same verdict, so fit-existing asks the framework about one of
// them only. It is the template sharing of share.go turned on the
// cluster's own nodes, which in a GPU cluster come in a few kinds, each
// in a few states of use.
//
// A key covers the node object (labels some filter may read, its spec
// without its identity, allocatable, declared features), what its pods
// take (requested resources, pod count, host ports) and its own devices
// with their allocations (snapshot.LocalDevices). Not covered, so the
// node gets no key (""): pods with required anti-affinity on it, devices
// reachable from other nodes, devices that may be shared between claims.
// Annotations, conditions, addresses and images are left out: no Filter
// plugin reads them.
type NodeKeys struct {
	snap    *snapshot.Snapshot
	reads   *sharing
	cache   map[string]cachedKey
	objects map[*v1.Node][sha256.Size]byte
}

type cachedKey struct {
	gen snapshot.Gen
	key string
}

// NewNodeKeys looks at the pods to place and at the snapshot for the
// labels a filter may read. nil when nodes cannot be compared this pass.
func NewNodeKeys(snap *snapshot.Snapshot, pending []*v1.Pod) (*NodeKeys, error) {
	reads, err := newSharing(snap, pending, false)
	if err != nil || reads == nil {
		return nil, err
	}
	return &NodeKeys{snap: snap, reads: reads, cache: map[string]cachedKey{}, objects: map[*v1.Node][sha256.Size]byte{}}, nil
}

// Keyable reports whether pod's verdict on a node is all in the node's
// key (with Memoizable: it depends on that node alone). Pods that read
// node names, claim volumes (a volume's topology may name any label) or
// mount volumes that count against a node's limits are not.
func (k *NodeKeys) Keyable(pod *v1.Pod) bool {
	if k == nil || pod.Spec.NodeName != "" {
		return false
	}
	if !(&sharing{read: map[string]bool{}}).addPod(pod) {
		return false
	}
	for _, vol := range pod.Spec.Volumes {
		s := vol.VolumeSource
		if s.ConfigMap == nil && s.Secret == nil && s.EmptyDir == nil && s.DownwardAPI == nil && s.Projected == nil {
			return false
		}
	}
	return true
}

// Of returns node's key, "" when the node is like no other.
func (k *NodeKeys) Of(node string) string {
	if k == nil {
		return ""
	}
	gen := k.snap.NodeGen(node)
	if c, ok := k.cache[node]; ok && c.gen == gen {
		return c.key
	}
	key := k.compute(node)
	k.cache[node] = cachedKey{gen: gen, key: key}
	return key
}

// nodeContent is what a key is made of.
type nodeContent struct {
	Node      [sha256.Size]byte // nodeObject's digest
	MilliCPU  int64
	Memory    int64
	Ephemeral int64
	Scalar    map[v1.ResourceName]int64
	Pods      int
	Ports     []string
	Devices   snapshot.LocalDevices
}

// nodeObject is what the filters read of the Node object.
type nodeObject struct {
	Labels      map[string]string
	Spec        v1.NodeSpec
	Allocatable v1.ResourceList
	Features    []string
}

func (k *NodeKeys) compute(name string) string {
	ni, err := k.snap.NodeInfos().Get(name)
	if err != nil || ni.Node() == nil || len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
		return ""
	}
	devices, ok := k.snap.LocalDevices(name)
	if !ok {
		return ""
	}
	obj, ok := k.object(ni.Node())
	if !ok {
		return ""
	}
	r := ni.GetRequested()
	c := nodeContent{Node: obj, MilliCPU: r.GetMilliCPU(), Memory: r.GetMemory(), Ephemeral: r.GetEphemeralStorage(),
		Scalar: r.GetScalarResources(), Pods: len(ni.GetPods()), Devices: devices}
	for ip, ports := range ni.GetUsedPorts() {
		for p := range ports {
			c.Ports = append(c.Ports, fmt.Sprintf("%s/%s/%d", ip, p.Protocol, p.Port))
		}
	}
	slices.Sort(c.Ports)
	b, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// object digests node's nodeObject; Node objects are not modified in
// place, so the digest is kept by pointer for the pass.
func (k *NodeKeys) object(node *v1.Node) ([sha256.Size]byte, bool) {
	if sum, ok := k.objects[node]; ok {
		return sum, true
	}
	o := nodeObject{Labels: k.reads.readLabels(node.Labels), Spec: node.Spec, Allocatable: node.Status.Allocatable, Features: node.Status.DeclaredFeatures}
	o.Spec.ProviderID, o.Spec.PodCIDR, o.Spec.PodCIDRs, o.Spec.DoNotUseExternalID = "", "", nil, ""
	b, err := json.Marshal(o)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	sum := sha256.Sum256(b)
	k.objects[node] = sum
	return sum, true
}
