package kwok

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// sliceNames names what buildSlices builds, for counters and devices in
// one slice or several.
func TestSliceNames(t *testing.T) {
	for _, tc := range []struct{ counters, devices int }{{0, 0}, {0, 1}, {1, 0}, {3, 130}, {maxCounterSetsPerSlice + 1, maxDevicesPerSlice}} {
		d := DriverConfig{Driver: "gpu.example.com"}
		for i := range tc.counters {
			d.SharedCounters = append(d.SharedCounters, resourceapi.CounterSet{Name: fmt.Sprintf("c%d", i)})
		}
		for i := range tc.devices {
			d.Devices = append(d.Devices, resourceapi.Device{Name: fmt.Sprintf("d%d", i)})
		}
		g := NodeGroupConfig{Template: TemplateConfig{Drivers: []DriverConfig{d, {Driver: "nic.example.com", Devices: []resourceapi.Device{{Name: "nic"}}}}}}
		var want []string
		for _, s := range g.buildSlices("n") {
			want = append(want, s.Name)
		}
		if got := g.sliceNames("n"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%d counter sets, %d devices: names %v, want %v", tc.counters, tc.devices, got, want)
		}
	}
}

// An instance's devices each carry a uuid of their own, as real drivers
// publish; the template's carry none, and a device the configuration
// gives a uuid, or no room for one, keeps what it has.
func TestInstanceSlicesUUIDs(t *testing.T) {
	full := resourceapi.Device{Name: "full", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for i := range resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		full.Attributes[resourceapi.QualifiedName(fmt.Sprintf("a%d", i))] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(i))}
	}
	given := resourceapi.Device{Name: "given", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{AttributeUUID: {StringValue: ptr.To("mine")}}}
	g := NodeGroupConfig{Template: TemplateConfig{Drivers: []DriverConfig{
		{Driver: "gpu.example.com", Devices: []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}, given, full}},
		{Driver: "nic.example.com", Devices: []resourceapi.Device{{Name: "gpu-0"}}},
	}}}
	seen := map[string]string{}
	for _, node := range []string{"n1", "n2"} {
		for _, s := range g.instanceSlices(node) {
			for _, d := range s.Spec.Devices {
				a, ok := d.Attributes[AttributeUUID]
				switch {
				case d.Name == "full":
					if ok || len(d.Attributes) != resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
						t.Errorf("%s/%s: a device with no room has %d attributes (uuid %v)", node, d.Name, len(d.Attributes), ok)
					}
				case d.Name == "given":
					if !ok || *a.StringValue != "mine" {
						t.Errorf("%s/%s: uuid %v, want the configured one", node, d.Name, a.StringValue)
					}
				case !ok || a.StringValue == nil || len(*a.StringValue) != 36:
					t.Errorf("%s/%s/%s: uuid %v, want one of its own", node, s.Spec.Driver, d.Name, a.StringValue)
				default:
					if other, dup := seen[*a.StringValue]; dup {
						t.Errorf("%s/%s/%s has the uuid of %s", node, s.Spec.Driver, d.Name, other)
					}
					seen[*a.StringValue] = node + "/" + s.Spec.Driver + "/" + d.Name
				}
			}
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d distinct uuids, want 6", len(seen))
	}
	for _, s := range g.buildSlices("template") {
		for _, d := range s.Spec.Devices {
			if _, ok := d.Attributes[AttributeUUID]; ok && d.Name != "given" {
				t.Errorf("the template's %s has a uuid", d.Name)
			}
		}
	}
	if again := g.instanceSlices("n1"); *again[0].Spec.Devices[0].Attributes[AttributeUUID].StringValue != deviceUUID("n1", "gpu.example.com", "gpu-0") {
		t.Error("an instance's uuids change between builds")
	}
}
