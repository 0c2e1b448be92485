package estimator

import (
	"crypto/sha256"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/lenhash"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/parallel"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
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
// with their allocations and the attributes some class, claim or claim
// template may read (snapshot.LocalDevices). Not covered, so the
// node gets no key (""): pods with required anti-affinity on it, devices
// reachable from other nodes, devices that may be shared between claims.
// Annotations, conditions, addresses and images are left out: no Filter
// plugin reads them.
type NodeKeys struct {
	snap    *snapshot.Snapshot
	reads   *sharing
	cache   map[string]cachedKey
	objects map[*v1.Node][sha256.Size]byte
	// rejected are the gang members' verdicts "does not fit" kept for
	// the gangs these keys serve (AlikePlacements).
	rejected *framework.Rejections
}

func (k *NodeKeys) rejections() *framework.Rejections {
	if k.rejected == nil {
		k.rejected = framework.NewKeyedRejections(k.Of)
	}
	return k.rejected
}

type cachedKey struct {
	gen snapshot.Gen
	key string
}

// NewNodeKeys looks at the scheduler profile's arguments, the pods to
// place and the snapshot for the labels a filter may read. nil when nodes
// cannot be compared this pass (or ever: the profile's addedAffinity
// reads node names).
func NewNodeKeys(snap *snapshot.Snapshot, profile *framework.ProfileArgs, pending []*v1.Pod) (*NodeKeys, error) {
	reads, err := newSharing(snap, profile, pending, false, nil)
	if err != nil || reads == nil {
		return nil, err
	}
	return &NodeKeys{snap: snap, reads: reads, cache: map[string]cachedKey{}, objects: map[*v1.Node][sha256.Size]byte{}}, nil
}

// Keyable reports whether pod's verdict on a node is all in the node's
// key (with Memoizable: it depends on that node alone). Pods that read
// node names, claim volumes (a volume's topology may name any label),
// mount volumes that count against a node's limits, are spread (by
// their own constraints or the profile's: the other nodes' pods count)
// or claim devices by an attribute keys leave out (a GPU's uuid:
// snapshot.CoversPod) are not.
func (k *NodeKeys) Keyable(pod *v1.Pod) bool {
	if k == nil || pod.Spec.NodeName != "" {
		return false
	}
	var profile *framework.ProfileArgs
	if k.reads != nil {
		profile = k.reads.profile
	}
	if len(spreadOf(pod, profile)) > 0 || readsNodeNames(pod, profile) {
		return false
	}
	for _, vol := range pod.Spec.Volumes {
		s := vol.VolumeSource
		if s.ConfigMap == nil && s.Secret == nil && s.EmptyDir == nil && s.DownwardAPI == nil && s.Projected == nil {
			return false
		}
	}
	return k.snap == nil || k.snap.CoversPod(pod)
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
	key := k.compute(node, k.object)
	k.cache[node] = cachedKey{gen: gen, key: key}
	return key
}

// Known records key as node's key in its present state, for a caller
// that made that state by copying a placement to node from a node whose
// key after the placement was key: the copy leaves the node as the
// placement left its own (CopyPlacement), so computing the key again
// would give key (verify mode checks it so, as scale-down's removal
// simulation does).
func (k *NodeKeys) Known(node, key string) {
	if k == nil || key == "" {
		return
	}
	k.cache[node] = cachedKey{gen: k.snap.NodeGen(node), key: key}
}

// minParallelKeys is how many keys OfAll makes per goroutine at least.
const minParallelKeys = 256

// OfAll is Of of each node, the keys not known yet made on as many
// goroutines as the processors allow: fit-existing's first scan in a pass
// keys every candidate (10,000 at the largest benchmark), and a key reads
// only its node, so they are made side by side like the framework's
// Filter calls (reads of the snapshot may run concurrently).
func (k *NodeKeys) OfAll(nodes []string) []string {
	keys := make([]string, len(nodes))
	if k == nil {
		return keys
	}
	gens := make([]snapshot.Gen, len(nodes))
	var todo []int
	for i, n := range nodes {
		gens[i] = k.snap.NodeGen(n)
		if c, ok := k.cache[n]; ok && c.gen == gens[i] {
			keys[i] = c.key
			continue
		}
		todo = append(todo, i)
	}
	// Node digests made meanwhile are kept by index and stored after:
	// the memo is read, never written, while goroutines run.
	made := make([]madeObject, len(todo))
	key := func(j int) {
		i := todo[j]
		keys[i] = k.compute(nodes[i], func(node *v1.Node) ([sha256.Size]byte, bool) {
			if sum, ok := k.objects[node]; ok {
				return sum, true
			}
			sum, ok := k.digest(node)
			if ok {
				made[j] = madeObject{node, sum}
			}
			return sum, ok
		})
	}
	parallel.Each(len(todo), minParallelKeys, key)
	for j, i := range todo {
		if m := made[j]; m.node != nil {
			k.objects[m.node] = m.sum
		}
		k.cache[nodes[i]] = cachedKey{gen: gens[i], key: keys[i]}
	}
	return keys
}

type madeObject struct {
	node *v1.Node
	sum  [sha256.Size]byte
}

// compute makes name's key, digesting its Node object with object.
func (k *NodeKeys) compute(name string, object func(*v1.Node) ([sha256.Size]byte, bool)) string {
	ni, err := k.snap.NodeInfos().Get(name)
	if err != nil || ni.Node() == nil || len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
		return ""
	}
	devices, ok := k.snap.LocalDevices(name)
	if !ok {
		return ""
	}
	obj, ok := object(ni.Node())
	if !ok {
		return ""
	}
	// Written field by field into the hash (JSON of the same content
	// cost a third of fit-existing at 5,000 nodes); every variable-length
	// part is preceded by its length.
	h := lenhash.Fields{H: sha256.New()}
	h.Bytes(obj[:])
	r := ni.GetRequested()
	h.Ints(r.GetMilliCPU(), r.GetMemory(), r.GetEphemeralStorage())
	scalar := r.GetScalarResources()
	h.Ints(int64(len(scalar)))
	for _, name := range slices.Sorted(maps.Keys(scalar)) {
		h.Str(string(name))
		h.Ints(scalar[name])
	}
	h.Ints(int64(len(ni.GetPods())))
	var ports []string
	for ip, used := range ni.GetUsedPorts() {
		for p := range used {
			ports = append(ports, ip+"/"+p.Protocol+"/"+strconv.Itoa(int(p.Port)))
		}
	}
	slices.Sort(ports)
	h.Strs(ports)
	h.Ints(int64(len(devices.Slices)))
	for _, d := range devices.Slices {
		h.Bytes(d[:])
	}
	h.Strs(devices.Used)
	return string(h.H.Sum(nil)) // raw bytes: a map key, never shown
}

// object digests node's nodeObject; Node objects are not modified in
// place, so the digest is kept by pointer for the pass.
func (k *NodeKeys) object(node *v1.Node) ([sha256.Size]byte, bool) {
	if sum, ok := k.objects[node]; ok {
		return sum, true
	}
	sum, ok := k.digest(node)
	if ok {
		k.objects[node] = sum
	}
	return sum, ok
}

// digest is object without the memo; safe for concurrent use.
func (k *NodeKeys) digest(node *v1.Node) ([sha256.Size]byte, bool) {
	spec := node.Spec
	spec.ProviderID, spec.PodCIDR, spec.PodCIDRs, spec.DoNotUseExternalID = "", "", nil, ""
	b, err := spec.Marshal()
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	h := lenhash.Fields{H: sha256.New()}
	h.Bytes(b)
	labels := k.reads.readLabels(node.Labels)
	if shortcut.Faulty(shortcut.NodeKeys) {
		labels = nil // a deliberately wrong key, for the checks' tests
	}
	h.Ints(int64(len(labels)))
	for _, name := range slices.Sorted(maps.Keys(labels)) {
		h.Str(name)
		h.Str(labels[name])
	}
	alloc := node.Status.Allocatable
	h.Ints(int64(len(alloc)))
	for _, name := range slices.Sorted(maps.Keys(alloc)) {
		q := alloc[name]
		h.Str(string(name))
		h.Str(q.String())
	}
	h.Strs(node.Status.DeclaredFeatures)
	var sum [sha256.Size]byte
	h.H.Sum(sum[:0])
	return sum, true
}
