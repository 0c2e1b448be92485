package builder

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ResourceSliceBuilder builds a resource.k8s.io/v1 ResourceSlice. A new slice
// is the only slice of its pool, at generation 1.
type ResourceSliceBuilder struct {
	slice resourceapi.ResourceSlice
}

// ResourceSlice starts a slice of driver's pool published for nodeName. An
// empty nodeName makes the slice available on all nodes (network-attached
// devices).
func ResourceSlice(name, nodeName, driver, pool string) *ResourceSliceBuilder {
	b := &ResourceSliceBuilder{slice: resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uidFor("resourceslice", "", name)},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: driver,
			Pool:   resourceapi.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
		},
	}}
	if nodeName == "" {
		b.slice.Spec.AllNodes = ptr.To(true)
	} else {
		b.slice.Spec.NodeName = ptr.To(nodeName)
	}
	return b
}

// Pool sets the pool generation and how many slices the pool has.
func (b *ResourceSliceBuilder) Pool(generation, sliceCount int64) *ResourceSliceBuilder {
	b.slice.Spec.Pool.Generation = generation
	b.slice.Spec.Pool.ResourceSliceCount = sliceCount
	return b
}

// Devices appends devices.
func (b *ResourceSliceBuilder) Devices(devices ...*DeviceBuilder) *ResourceSliceBuilder {
	for _, d := range devices {
		b.slice.Spec.Devices = append(b.slice.Spec.Devices, d.Obj())
	}
	return b
}

// SharedCounters appends counter sets that partitionable devices consume.
// The API allows only one of devices and counters per slice: publish the
// counters in their own slice of the same pool, with Pool(generation, 2) on
// both slices.
func (b *ResourceSliceBuilder) SharedCounters(sets ...*CounterSetBuilder) *ResourceSliceBuilder {
	for _, s := range sets {
		b.slice.Spec.SharedCounters = append(b.slice.Spec.SharedCounters, s.Obj())
	}
	return b
}

// Obj returns a copy of the slice built so far.
func (b *ResourceSliceBuilder) Obj() *resourceapi.ResourceSlice {
	return b.slice.DeepCopy()
}

// CounterSetBuilder builds a CounterSet of a ResourceSlice.
type CounterSetBuilder struct {
	set resourceapi.CounterSet
}

// CounterSet starts a counter set, e.g. the memory and compute slices of one
// physical GPU.
func CounterSet(name string) *CounterSetBuilder {
	return &CounterSetBuilder{set: resourceapi.CounterSet{Name: name, Counters: map[string]resourceapi.Counter{}}}
}

// Counter sets a counter's total, e.g. ("slices", "7") or ("memory", "80Gi").
func (b *CounterSetBuilder) Counter(name, value string) *CounterSetBuilder {
	b.set.Counters[name] = resourceapi.Counter{Value: quantity(value)}
	return b
}

// Obj returns a copy of the counter set.
func (b *CounterSetBuilder) Obj() resourceapi.CounterSet {
	return *b.set.DeepCopy()
}

// DeviceBuilder builds one device of a ResourceSlice.
type DeviceBuilder struct {
	dev resourceapi.Device
}

// Device starts a device named name.
func Device(name string) *DeviceBuilder {
	return &DeviceBuilder{dev: resourceapi.Device{
		Name:       name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
	}}
}

// Attr sets an attribute. Values of any integer type become int attributes,
// string and bool map to their kinds; any other type is stored as its
// fmt.Sprint string so a test typo cannot panic. Use VersionAttr for semver.
// A name without a domain is in the driver's domain; matchAttribute across
// drivers needs a shared domain such as "resource.kubernetes.io/pcieRoot".
func (b *DeviceBuilder) Attr(name string, value any) *DeviceBuilder {
	var a resourceapi.DeviceAttribute
	switch v := value.(type) {
	case int:
		a.IntValue = ptr.To(int64(v))
	case int32:
		a.IntValue = ptr.To(int64(v))
	case int64:
		a.IntValue = ptr.To(v)
	case uint:
		a.IntValue = ptr.To(int64(v))
	case uint32:
		a.IntValue = ptr.To(int64(v))
	case string:
		a.StringValue = ptr.To(v)
	case bool:
		a.BoolValue = ptr.To(v)
	default:
		a.StringValue = ptr.To(fmt.Sprint(v))
	}
	b.dev.Attributes[resourceapi.QualifiedName(name)] = a
	return b
}

// VersionAttr sets a semantic-version attribute, e.g. ("driverVersion", "1.2.3").
func (b *DeviceBuilder) VersionAttr(name, version string) *DeviceBuilder {
	b.dev.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{VersionValue: ptr.To(version)}
	return b
}

// Capacity sets a capacity, e.g. ("memory", "80Gi").
func (b *DeviceBuilder) Capacity(name, value string) *DeviceBuilder {
	b.dev.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: quantity(value)}
	return b
}

// CapacityPolicy sets a capacity together with its request policy, for
// consumable capacity: defaultRequest is what a claim that asks for nothing
// takes; step, when not empty, rounds requests up to multiples of it.
func (b *DeviceBuilder) CapacityPolicy(name, value, defaultRequest, step string) *DeviceBuilder {
	p := &resourceapi.CapacityRequestPolicy{Default: ptr.To(quantity(defaultRequest))}
	if step != "" {
		p.ValidRange = &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(quantity(defaultRequest)), Step: ptr.To(quantity(step))}
	}
	b.dev.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: quantity(value), RequestPolicy: p}
	return b
}

// ConsumesCounters makes the device draw counters (name -> amount) from a
// counter set of the slice: a partition of a partitionable device.
func (b *DeviceBuilder) ConsumesCounters(counterSet string, counters map[string]string) *DeviceBuilder {
	c := resourceapi.DeviceCounterConsumption{CounterSet: counterSet, Counters: map[string]resourceapi.Counter{}}
	for name, v := range counters {
		c.Counters[name] = resourceapi.Counter{Value: quantity(v)}
	}
	b.dev.ConsumesCounters = append(b.dev.ConsumesCounters, c)
	return b
}

// AllowMultipleAllocations lets several claims share the device (consumable
// capacity).
func (b *DeviceBuilder) AllowMultipleAllocations() *DeviceBuilder {
	b.dev.AllowMultipleAllocations = ptr.To(true)
	return b
}

// Taint adds a device taint, e.g. ("example.com/unhealthy", "", NoSchedule).
func (b *DeviceBuilder) Taint(key, value string, effect resourceapi.DeviceTaintEffect) *DeviceBuilder {
	b.dev.Taints = append(b.dev.Taints, resourceapi.DeviceTaint{Key: key, Value: value, Effect: effect})
	return b
}

// Obj returns a copy of the device.
func (b *DeviceBuilder) Obj() resourceapi.Device {
	return *b.dev.DeepCopy()
}
