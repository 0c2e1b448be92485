// Package utilization tells how much of a node is in use: the highest of
// its CPU, memory and DRA device use. Devices are counted by what they
// really give away: a whole device allocated counts whole; a partitionable
// device (shared counters) counts by the counters its allocated partitions
// consume; a device with consumable capacity counts by the capacity its
// shares consume. Counting whole devices only would call a GPU with one of
// seven slices taken fully used, or fully idle, and neither is true.
package utilization

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/parallel"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// NodeUtilization is the utilization of one node, each part in [0, 1].
type NodeUtilization struct {
	CPU, Memory float64
	// DRA is the highest device use among the node's drivers (0 without
	// devices); Driver names that driver.
	DRA    float64
	Driver string
	// HasDevices is true when DRA drivers publish devices for the node:
	// such a node is an accelerator node for the GPU threshold.
	HasDevices bool
	// Utilization is the highest of CPU, Memory and DRA; Resource says
	// which ("cpu", "memory" or the driver's name).
	Utilization float64
	Resource    string
}

func (i NodeUtilization) String() string {
	return fmt.Sprintf("%.3f (%s; cpu %.3f, memory %.3f, devices %.3f)", i.Utilization, i.Resource, i.CPU, i.Memory, i.DRA)
}

// Calculator answers for many nodes of one snapshot: the slices are
// indexed by node once, so a pass over every node costs O(slices + nodes),
// not O(slices × nodes).
type Calculator struct {
	byNode map[string][]*resourceapi.ResourceSlice
	// counters are every pool's counter sets: counter sets may be
	// published in another slice of the pool than the devices consuming
	// them.
	counters map[poolKey][]resourceapi.CounterSet
	state    *structured.AllocatedState
	// shared are the devices holding at least one share.
	shared map[structured.DeviceID]bool
	// ids lists a node's slice's device ids (see DeviceIDer).
	ids func(slice *resourceapi.ResourceSlice, node string) []structured.DeviceID
	// poolNode is the node every slice of a pool is bound to, "" when
	// they are not all one node's: only a node whose pools are its own
	// has a device use that its snapshot.DeviceState decides.
	poolNode map[poolKey]string
	// memo and states: see Remember.
	memo   *Memo
	states func(node string) snapshot.DeviceState
}

// Memo keeps nodes' device use from one pass to the next (Remember): an
// idle pass over thousands of nodes would otherwise count every device
// of every node again. Not safe for concurrent use.
type Memo struct {
	uses map[string]memoUse
	// passes counts Remember calls; a node not read for two is dropped.
	passes uint64
}

// memoUse is a node's device use, the DeviceState it was counted in and
// the pass it was last read in.
type memoUse struct {
	state      snapshot.DeviceState
	use        float64
	driver     string
	hasDevices bool
	read       uint64
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{uses: map[string]memoUse{}} }

// DeviceStater is the snapshot's DeviceState (simulator/snapshot).
type DeviceStater interface {
	DeviceState(node string) snapshot.DeviceState
}

// DeviceIDer is a snapshot that keeps its slices' device ids (the
// simulator's does across passes): interning them again for every device
// of every node is most of what a pass over thousands of nodes costs.
type DeviceIDer interface {
	DeviceIDs(slice *resourceapi.ResourceSlice, node string) []structured.DeviceID
}

type poolKey struct{ driver, pool string }

type counterKey struct{ driver, pool, set string }

// New indexes the slices (with their newest pool generation only, as the
// allocator reads them) against the allocated-device state.
func New(slices []*resourceapi.ResourceSlice, state *structured.AllocatedState) *Calculator {
	newest := map[poolKey]int64{}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		newest[k] = max(newest[k], s.Spec.Pool.Generation)
	}
	c := &Calculator{byNode: map[string][]*resourceapi.ResourceSlice{}, counters: map[poolKey][]resourceapi.CounterSet{},
		state: state, shared: map[structured.DeviceID]bool{}, ids: deviceIDs, poolNode: map[poolKey]string{}}
	for _, s := range slices {
		k := poolKey{s.Spec.Driver, s.Spec.Pool.Name}
		node, seen := c.poolNode[k]
		switch n := ptr.Deref(s.Spec.NodeName, ""); {
		case !seen:
			c.poolNode[k] = n
		case node != n:
			c.poolNode[k] = ""
		}
		if s.Spec.Pool.Generation < newest[k] {
			continue
		}
		c.counters[k] = append(c.counters[k], s.Spec.SharedCounters...)
		if s.Spec.NodeName != nil {
			c.byNode[*s.Spec.NodeName] = append(c.byNode[*s.Spec.NodeName], s)
		}
	}
	if state != nil {
		for id := range state.AllocatedSharedDeviceIDs {
			c.shared[structured.DeviceID{Driver: id.Driver, Pool: id.Pool, Device: id.Device}] = true
		}
	}
	return c
}

// FromSnapshot builds a Calculator over the slices and allocations the
// scheduler framework reads.
func FromSnapshot(dra fwk.SharedDRAManager) (*Calculator, error) {
	slices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, fmt.Errorf("list resource slices: %w", err)
	}
	state, err := dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return nil, fmt.Errorf("allocated devices: %w", err)
	}
	c := New(slices, state)
	if ider, ok := dra.(DeviceIDer); ok {
		c.ids = ider.DeviceIDs
	}
	if st, ok := dra.(DeviceStater); ok {
		c.states = st.DeviceState
	}
	return c, nil
}

// Remember makes the calculator keep the device use it counts in m, and
// take it from there for a node whose DeviceState (its slice objects and
// the prints of the allocations that may hold its devices) is the one it
// was counted in. Only nodes whose pools are all their own are kept: a
// pool with slices elsewhere has counters the node's DeviceState does not
// show. A calculator not made by FromSnapshot of a snapshot with
// DeviceStates keeps nothing.
func (c *Calculator) Remember(m *Memo) {
	if c.states == nil {
		return
	}
	m.passes++
	for node, u := range m.uses {
		if m.passes-u.read > 2 {
			delete(m.uses, node) // gone, or no longer looked at
		}
	}
	c.memo = m
}

func deviceIDs(slice *resourceapi.ResourceSlice, _ string) []structured.DeviceID {
	return snapshot.SliceDeviceIDs(slice)
}

// Node returns the utilization of a node: requests of its pods against
// its allocatable, and its devices as described in the package comment.
func (c *Calculator) Node(ni fwk.NodeInfo) NodeUtilization {
	var info NodeUtilization
	req, alloc := ni.GetRequested(), ni.GetAllocatable()
	info.CPU = ratio(float64(req.GetMilliCPU()), float64(alloc.GetMilliCPU()))
	info.Memory = ratio(float64(req.GetMemory()), float64(alloc.GetMemory()))
	info.Utilization, info.Resource = info.CPU, string(corev1.ResourceCPU)
	if info.Memory > info.Utilization {
		info.Utilization, info.Resource = info.Memory, string(corev1.ResourceMemory)
	}
	if node := ni.Node(); node != nil {
		info.DRA, info.Driver, info.HasDevices = c.remembered(node.Name)
	}
	if info.HasDevices && info.DRA > info.Utilization {
		info.Utilization, info.Resource = info.DRA, info.Driver
	}
	return info
}

// remembered is devices(node), from the memo when it holds the node in
// the same DeviceState.
func (c *Calculator) remembered(node string) (float64, string, bool) {
	if c.memo == nil || !c.ownPools(node) {
		return c.devices(node)
	}
	st := c.states(node)
	m, ok := c.memo.uses[node]
	if !ok || !m.holds(st) {
		m.use, m.driver, m.hasDevices = c.devices(node)
		m.state = st
	}
	m.read = c.memo.passes
	c.memo.uses[node] = m
	return m.use, m.driver, m.hasDevices
}

// NodesAhead counts the device use of nodes side by side and keeps it in
// the memo (Remember), where Node then finds it: a first pass counts
// every node's devices, 10,000 nodes' at L4. It counts only what Node
// would: nodes whose pools are all their own, not held in the memo in
// their current DeviceState. Without a memo it does nothing. Counting
// reads the calculator and the snapshot only; the memo is written
// afterwards, on the caller's goroutine.
func (c *Calculator) NodesAhead(nodes []string) {
	if c.memo == nil {
		return
	}
	counted := make([]memoUse, len(nodes))
	done := make([]bool, len(nodes))
	parallel.Each(len(nodes), 256, func(i int) {
		node := nodes[i]
		if !c.ownPools(node) {
			return
		}
		st := c.states(node)
		if m, ok := c.memo.uses[node]; ok && m.holds(st) {
			return
		}
		u := &counted[i]
		u.use, u.driver, u.hasDevices = c.devices(node)
		u.state, done[i] = st, true
	})
	for i, ok := range done {
		if ok {
			counted[i].read = c.memo.passes
			c.memo.uses[nodes[i]] = counted[i]
		}
	}
}

// holds reports whether m was counted in DeviceState st.
func (m memoUse) holds(st snapshot.DeviceState) bool {
	return m.state.Node == st.Node && m.state.Shared == st.Shared && slices.Equal(m.state.Slices, st.Slices)
}

// ownPools: every pool of node's slices has all its slices on node.
func (c *Calculator) ownPools(node string) bool {
	for _, s := range c.byNode[node] {
		if c.poolNode[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] != node {
			return false
		}
	}
	return true
}

// devices returns the highest per-driver device use of a node. A driver's
// use is the mean over its physical units: each counter set, and each
// device that consumes no counter.
func (c *Calculator) devices(node string) (float64, string, bool) {
	type sum struct {
		used  float64
		units int
	}
	perDriver := map[string]*sum{}
	// Consumption of the allocated partitions, by counter set and counter.
	consumed := map[counterKey]map[string]int64{}
	pools := map[poolKey]bool{}
	for _, s := range c.byNode[node] {
		pools[poolKey{s.Spec.Driver, s.Spec.Pool.Name}] = true
		d := perDriver[s.Spec.Driver]
		if d == nil {
			d = &sum{}
			perDriver[s.Spec.Driver] = d
		}
		ids := c.ids(s, node)
		for i := range s.Spec.Devices {
			dev, id := &s.Spec.Devices[i], ids[i]
			if len(dev.ConsumesCounters) > 0 {
				if !c.allocated(id) {
					continue
				}
				for _, cc := range dev.ConsumesCounters {
					k := counterKey{s.Spec.Driver, s.Spec.Pool.Name, cc.CounterSet}
					if consumed[k] == nil {
						consumed[k] = map[string]int64{}
					}
					for name, v := range cc.Counters {
						consumed[k][name] += v.Value.MilliValue()
					}
				}
				continue
			}
			d.units++
			d.used += c.deviceUse(id, dev)
		}
	}
	// Every counter set of the node's pools is a unit, used by the most
	// consumed of its counters.
	for pk := range pools {
		d := perDriver[pk.driver]
		for _, cs := range c.counters[pk] {
			k := counterKey{pk.driver, pk.pool, cs.Name}
			use := 0.0
			for name, total := range cs.Counters {
				use = max(use, ratio(float64(consumed[k][name]), float64(total.Value.MilliValue())))
			}
			d.units++
			d.used += use
		}
	}
	best, driver, found := 0.0, "", false
	drivers := make([]string, 0, len(perDriver))
	for name := range perDriver {
		drivers = append(drivers, name)
	}
	sort.Strings(drivers) // ties go to the first name, every time
	for _, name := range drivers {
		d := perDriver[name]
		if d.units == 0 {
			continue
		}
		found = true
		if u := d.used / float64(d.units); u > best || driver == "" {
			best, driver = u, name
		}
	}
	return best, driver, found
}

func (c *Calculator) allocated(id structured.DeviceID) bool {
	return c.state != nil && c.state.AllocatedDevices.Has(id)
}

// deviceUse is how much of a device without counters is taken: all of it
// when allocated whole; with consumable capacity, the most consumed of
// its capacities; a share of a device without capacities, all of it (no
// number says how much is left, so it is not called idle).
func (c *Calculator) deviceUse(id structured.DeviceID, dev *resourceapi.Device) float64 {
	if c.allocated(id) {
		return 1
	}
	if !c.shared[id] {
		return 0
	}
	consumed := c.state.AggregatedCapacity[id]
	use, known := 0.0, false
	for name, capa := range dev.Capacity {
		total := capa.Value
		if total.IsZero() {
			continue
		}
		known = true
		if q := consumed[name]; q != nil {
			use = max(use, quantityRatio(q, &total))
		}
	}
	if !known {
		return 1
	}
	return use
}

func quantityRatio(used, total *resource.Quantity) float64 {
	return ratio(used.AsApproximateFloat64(), total.AsApproximateFloat64())
}

// ratio is used/total capped at 1; nothing of nothing is 0.
func ratio(used, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return min(used/total, 1)
}
