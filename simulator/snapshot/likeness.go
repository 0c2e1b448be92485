package snapshot

import (
	"crypto/sha256"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// LocalDevices is what the DRA allocator can give a claim on one node,
// with the node's name taken out: a digest of each of the node's own
// slices (DeviceTaintRules applied) in the order the allocator lists
// them, taken with no node name, no generation and a pool named after
// the node renamed "", and which of their devices are allocated ("slice
// index/device"). Two nodes with equal LocalDevices offer the same
// devices in the same state.
type LocalDevices struct {
	Slices [][sha256.Size]byte
	Used   []string
}

// LocalDevices returns node's LocalDevices. ok is false when they are not
// all there is to a claim's answer on the node or cannot be compared:
// slices not bound to a node exist (any node may draw on them), a pool
// of the node spans generations, or a device may be shared between
// claims (its shares and consumed capacity are not described here).
// Not safe for concurrent use: it memoises slice digests.
func (s *Snapshot) LocalDevices(node string) (devs LocalDevices, ok bool) {
	if len(s.slicesOfNode[""]) > 0 {
		return LocalDevices{}, false
	}
	at := make([]int, 0, len(s.slicesOfNode[node]))
	for name := range s.slicesOfNode[node] {
		at = append(at, s.patchedSlices.pos[name])
	}
	slices.Sort(at)
	generation := map[string]int64{}
	for i, k := range at {
		slice := s.patchedSlices.items[k]
		pool := slice.Spec.Pool
		if g, seen := generation[pool.Name]; seen && g != pool.Generation {
			return LocalDevices{}, false
		}
		generation[pool.Name] = pool.Generation
		for _, d := range slice.Spec.Devices {
			if ptr.Deref(d.AllowMultipleAllocations, false) {
				return LocalDevices{}, false
			}
			if s.alloc.dedicated.Has(structured.MakeDeviceID(slice.Spec.Driver, pool.Name, d.Name)) {
				devs.Used = append(devs.Used, strconv.Itoa(i)+"/"+d.Name)
			}
		}
		sum, ok := s.sliceDigest(slice, node)
		if !ok {
			return LocalDevices{}, false
		}
		devs.Slices = append(devs.Slices, sum)
	}
	return devs, true
}

// SpecDigest hashes a slice spec as its protobuf encoding, which is
// deterministic (map keys sorted, quantities canonical) and several times
// cheaper than JSON: keys of thousands of nodes' slices are made per pass.
func SpecDigest(spec *resourceapi.ResourceSliceSpec) ([sha256.Size]byte, error) {
	b, err := spec.Marshal()
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// sliceDigest hashes a slice's spec without what names its node. Slices
// are never modified in place, so the digest is kept by pointer until
// Reset.
func (s *Snapshot) sliceDigest(slice *resourceapi.ResourceSlice, node string) ([sha256.Size]byte, bool) {
	if sum, ok := s.digests[slice]; ok {
		return sum, true
	}
	spec := slice.Spec // a shallow copy: only the top-level fields change
	spec.NodeName = nil
	spec.Pool.Generation = 0
	if spec.Pool.Name == node {
		spec.Pool.Name = ""
	}
	sum, err := SpecDigest(&spec)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	if s.digests == nil {
		s.digests = map[*resourceapi.ResourceSlice][sha256.Size]byte{}
	}
	s.digests[slice] = sum
	return sum, true
}
