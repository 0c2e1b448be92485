package snapshot

import (
	"crypto/sha256"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/lenhash"
)

// LocalDevices is what the DRA allocator can give a claim on one node,
// with the node's name taken out: a digest of each of the node's own
// slices (DeviceTaintRules applied) in the order the allocator lists
// them, taken with no node name, no generation, a pool named after the
// node renamed "" and only the device attributes the snapshot's classes,
// claims and claim templates may read (attrreads), and which of their
// devices are allocated ("slice index/device"). Two nodes with equal
// LocalDevices offer those claims the same devices in the same state.
type LocalDevices struct {
	Slices [][sha256.Size]byte
	Used   []string
}

// LocalDevices returns node's LocalDevices. ok is false when they are not
// all there is to a claim's answer on the node or cannot be compared:
// slices not bound to a node exist (any node may draw on them), a pool
// of the node spans generations, or a device may be shared between
// claims (its shares and consumed capacity are not described here).
// Like the other reads, it may run concurrently with reads (the memo of
// what it reads of each slice is locked), never with a mutation.
func (s *Snapshot) LocalDevices(node string) (devs LocalDevices, ok bool) {
	if len(s.slicesOfNode[""]) > 0 {
		return LocalDevices{}, false
	}
	generation := map[string]int64{}
	reads := s.attrReads()
	for i, slice := range s.nodeSlices(node) {
		pool := slice.Spec.Pool
		if g, seen := generation[pool.Name]; seen && g != pool.Generation {
			return LocalDevices{}, false
		}
		generation[pool.Name] = pool.Generation
		f, ok := s.facts.of(slice, node, reads)
		if !ok || f.shared {
			return LocalDevices{}, false
		}
		for j, id := range f.ids {
			if s.alloc.dedicated.Has(id) {
				devs.Used = append(devs.Used, strconv.Itoa(i)+"/"+slice.Spec.Devices[j].Name)
			}
		}
		devs.Slices = append(devs.Slices, f.digest)
	}
	return devs, true
}

// SliceDigest is the digest LocalDevices takes of slice, one of node's
// slices: a hash of its spec without node name and pool generation, a
// pool named after node renamed "", and the device attributes nothing
// reads (narrowDigest). It is memoised with what
// LocalDevices reads, so that the other keys made of nodes' slices (the
// stranded-capacity analyzer's) do not encode the slices again. ok is
// false when the slice cannot be encoded.
func (s *Snapshot) SliceDigest(slice *resourceapi.ResourceSlice, node string) (digest [sha256.Size]byte, ok bool) {
	f, ok := s.facts.of(slice, node, s.attrReads())
	return f.digest, ok
}

// SliceDeviceIDs are the ids of slice's devices, in order.
func SliceDeviceIDs(slice *resourceapi.ResourceSlice) []structured.DeviceID {
	ids := make([]structured.DeviceID, len(slice.Spec.Devices))
	for j, d := range slice.Spec.Devices {
		ids[j] = structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, d.Name)
	}
	return ids
}

// DeviceIDs are SliceDeviceIDs of slice, memoised with what
// LocalDevices reads: MakeDeviceID interns three strings per device, and
// the per-node readers (stranded capacity, utilization) look up every
// device of thousands of nodes every pass. node is the node the slice is
// bound to.
func (s *Snapshot) DeviceIDs(slice *resourceapi.ResourceSlice, node string) []structured.DeviceID {
	if f, ok := s.facts.of(slice, node, nil); ok {
		return f.ids
	}
	return SliceDeviceIDs(slice)
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

// baseDigest hashes a slice's spec without what names its node and
// without its devices' attributes, which narrowDigest adds as a set of
// readers sees them.
func baseDigest(slice *resourceapi.ResourceSlice, node string) ([sha256.Size]byte, bool) {
	spec := slice.Spec // a shallow copy: only the top-level fields change
	spec.NodeName = nil
	spec.Pool.Generation = 0
	if spec.Pool.Name == node {
		spec.Pool.Name = ""
	}
	spec.Devices = slices.Clone(spec.Devices)
	for i := range spec.Devices {
		spec.Devices[i].Attributes = nil
	}
	sum, err := SpecDigest(&spec)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sum, true
}

// narrowDigest is the digest of a slice whose baseDigest is base and
// whose devices are devs, with only their attributes in reads: the set's
// key, the base, then each device's attributes read, by name. The key is
// in it because a digest's meaning is the set's: a slice without an
// attribute and one with it, unread, are alike to this set only.
func narrowDigest(base [sha256.Size]byte, devs []resourceapi.Device, reads *attrreads.Reads) [sha256.Size]byte {
	h := lenhash.Fields{H: sha256.New()}
	h.Str(reads.Key())
	h.H.Write(base[:])
	var names []resourceapi.QualifiedName
	for i := range devs {
		names = names[:0]
		for name := range devs[i].Attributes {
			if reads.Has(name) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		h.Ints(int64(len(names)))
		for _, name := range names {
			h.Str(string(name))
			writeValue(&h, devs[i].Attributes[name])
		}
	}
	var sum [sha256.Size]byte
	h.H.Sum(sum[:0])
	return sum
}

// writeValue writes a's kind and value, as attrreads.ValueString tells
// them apart, without making a string of each.
func writeValue(h *lenhash.Fields, a resourceapi.DeviceAttribute) {
	switch {
	case a.IntValue != nil:
		h.Ints('i', *a.IntValue)
	case a.BoolValue != nil:
		b := int64(0)
		if *a.BoolValue {
			b = 1
		}
		h.Ints('b', b)
	case a.StringValue != nil:
		h.Ints('s')
		h.Str(*a.StringValue)
	case a.VersionValue != nil:
		h.Ints('v')
		h.Str(*a.VersionValue)
	default:
		h.Ints('-')
	}
}
