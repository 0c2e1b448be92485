// Package fragmentation measures and minimises stranded device capacity:
// capacity of a node's DRA devices (shared counters, consumable capacity,
// whole devices) that is free but cannot serve any of the request shapes
// the cluster asks for. Whether a shape fits is always the real
// scheduler framework's answer (probe pods with the shape's claims on a
// fork of the snapshot, see probe.go); this package only does the
// bookkeeping of what is free, and memoises answers per node state.
package fragmentation

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Resource names one kind of device capacity, as the metrics label it:
// "<driver>/counter/<counter>" for shared counters (the slices of a
// partitionable GPU), "<driver>/capacity/<name>" for the consumable
// capacity of devices that allow multiple allocations, "<driver>/devices"
// for plain devices that are allocated whole.
type Resource string

// CounterResource, CapacityResource and DevicesResource build Resource names.
func CounterResource(driver, counter string) Resource {
	return Resource(driver + "/counter/" + counter)
}

// CapacityResource names a consumable capacity.
func CapacityResource(driver string, name resourceapi.QualifiedName) Resource {
	return Resource(driver + "/capacity/" + string(name))
}

// DevicesResource names the plain devices of a driver.
func DevicesResource(driver string) Resource { return Resource(driver + "/devices") }

// Amounts holds quantities per resource: counter units, capacity in its
// base unit (bytes for memory), devices by number.
type Amounts map[Resource]float64

// Add adds b to a.
func (a Amounts) Add(b Amounts) {
	for r, v := range b {
		a[r] += v
	}
}

// Resources lists the resources, sorted.
func (a Amounts) Resources() []Resource {
	return slices.Sorted(maps.Keys(a))
}

// Fraction is the mean over the resources of total of part/total: one
// number to compare leftovers of different resources by.
func Fraction(part, total Amounts) float64 {
	var sum float64
	n := 0
	for r, t := range total {
		if t <= 0 {
			continue
		}
		sum += part[r] / t
		n++
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// state is what a node's devices hold at one moment.
type state struct {
	// key identifies the content up to node and pool names: nodes with
	// the same key have the same devices, equally allocated, so the
	// framework answers the same about them.
	key         string
	total, free Amounts
}

// counterKey names one counter set of one pool.
type counterKey struct{ driver, pool, set string }

// measure reads a node's devices, its own slices nodeSlices, and their
// allocated state. sliceKey returns the content key of one of node's
// slices (cached by the caller), which may leave out the pool's name and
// generation.
func measure(snap *snapshot.Snapshot, node string, nodeSlices []*resourceapi.ResourceSlice, sliceKey func(*resourceapi.ResourceSlice, string) string) (state, error) {
	alloc, err := snap.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return state{}, fmt.Errorf("node %s: allocated devices: %w", node, err)
	}
	st := state{total: Amounts{}, free: Amounts{}}
	counters := map[counterKey]map[string]float64{} // left of each counter
	var used []counterUse
	h := fnv.New128a()
	var sharedInUse map[structured.DeviceID]bool
	for _, s := range nodeSlices {
		driver, pool := s.Spec.Driver, s.Spec.Pool.Name
		fmt.Fprintf(h, "slice %s %s %d|", sliceKey(s, node), relativePool(pool, node), s.Spec.Pool.Generation)
		for _, cs := range s.Spec.SharedCounters {
			k := counterKey{driver, pool, cs.Name}
			if counters[k] == nil {
				counters[k] = map[string]float64{}
			}
			for name, c := range cs.Counters {
				q := c.Value
				v := q.AsApproximateFloat64()
				counters[k][name] += v
				st.total[CounterResource(driver, name)] += v
			}
		}
		ids := snap.DeviceIDs(s, node)
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			id := ids[i]
			shared := ptr.Deref(d.AllowMultipleAllocations, false)
			inUse := alloc.AllocatedDevices.Has(id)
			consumed := alloc.AggregatedCapacity[id]
			if shared && !inUse {
				if len(consumed) > 0 {
					inUse = true
				} else {
					if sharedInUse == nil {
						sharedInUse = sharedDevicesInUse(alloc)
					}
					inUse = sharedInUse[id]
				}
			}
			if inUse {
				fmt.Fprintf(h, "%d:used|", i)
				for _, c := range d.ConsumesCounters {
					used = append(used, counterUse{counterKey{driver, pool, c.CounterSet}, c.Counters})
				}
			}
			switch {
			case shared:
				for _, name := range slices.Sorted(maps.Keys(d.Capacity)) {
					c := d.Capacity[name]
					total := c.Value.AsApproximateFloat64()
					left := total
					if q := consumed[name]; q != nil {
						left -= q.AsApproximateFloat64()
						// q is the snapshot's, and measure may run on
						// several goroutines (MeasureAhead): String
						// would cache its text in it.
						number, suffix := q.CanonicalizeBytes(nil)
						fmt.Fprintf(h, "%d:%s=%s%s|", i, name, number, suffix)
					}
					r := CapacityResource(driver, name)
					st.total[r] += total
					st.free[r] += max(left, 0)
				}
			case len(d.ConsumesCounters) > 0:
				// A partition: what it offers is counted in counters.
			default:
				r := DevicesResource(driver)
				st.total[r]++
				if !inUse {
					st.free[r]++
				}
			}
		}
	}
	for _, u := range used {
		for name, c := range u.counters {
			if left, ok := counters[u.set]; ok {
				v := c.Value
				left[name] -= v.AsApproximateFloat64()
			}
		}
	}
	for k, left := range counters {
		for name, v := range left {
			st.free[CounterResource(k.driver, name)] += max(v, 0)
		}
	}
	st.key = fmt.Sprintf("%x", h.Sum(nil))
	return st, nil
}

type counterUse struct {
	set      counterKey
	counters map[string]resourceapi.Counter
}

// sharedDevicesInUse indexes the devices with at least one share. It is
// built only for nodes with shared devices that consume no capacity,
// since it walks every share of the cluster.
func sharedDevicesInUse(alloc *structured.AllocatedState) map[structured.DeviceID]bool {
	out := make(map[structured.DeviceID]bool, len(alloc.AllocatedSharedDeviceIDs))
	for sid := range alloc.AllocatedSharedDeviceIDs {
		out[sid.GetDeviceID()] = true
	}
	return out
}

// relativePool strips the node's name from a pool name, so that the pools
// of two nodes of one layout compare equal (pools are named after their
// node by drivers and by template.Instantiate).
func relativePool(pool, node string) string {
	if pool == node {
		return ""
	}
	return strings.TrimPrefix(pool, node+"/")
}

// sliceContentKey hashes what of a slice matters to the allocator, without
// its name, node and pool name.
func sliceContentKey(s *resourceapi.ResourceSlice) string {
	spec := s.Spec
	spec.NodeName, spec.Pool.Name = nil, ""
	sum, err := snapshot.SpecDigest(&spec)
	if err != nil {
		// Unencodable: a key of its own, never shared.
		return fmt.Sprintf("%p", s)
	}
	return string(sum[:])
}
