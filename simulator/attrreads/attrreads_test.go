package attrreads

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func TestExpression(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		names []string
		all   bool
	}{
		{expr: `device.attributes["gpu.example.com"].productName == "H100"`, names: []string{"productName"}},
		{expr: `device.attributes["gpu.example.com"]["uuid"] == "GPU-1"`, names: []string{"uuid"}},
		{expr: `has(device.attributes["gpu.example.com"].model)`, names: []string{"model"}},
		{expr: `device.attributes["gpu.example.com"].?model.orValue("") == "a"`, names: []string{"model"}},
		{expr: `device.attributes[?"gpu.example.com"].model.orValue("") == "a"`, names: []string{"model"}},
		{expr: `device.attributes["a.com"].x > 1 && device.attributes["b.com"].y && device.attributes["a.com"].x < 9`, names: []string{"x", "y"}},
		{expr: `device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))`, names: []string{"driverVersion"}},
		{expr: `[1, 2].all(i, device.attributes["gpu.example.com"].cores > i)`, names: []string{"cores"}},
		{expr: `device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`},
		{expr: `device.driver == "gpu.example.com" && device.allowMultipleAllocations`},
		{expr: `true`},
		// Read by a computed name, iterated or handed on: all of them.
		{expr: `device.attributes["gpu.example.com"].exists(k, k == "uuid")`, all: true},
		{expr: `device.attributes["gpu.example.com"][name] == "x"`, all: true},
		{expr: `device.attributes["gpu.example.com"]["u" + "uid"] == "x"`, all: true},
		{expr: `device.attributes.exists(d, true)`, all: true},
		{expr: `size(device.attributes) > 0`, all: true},
		{expr: `size(device.attributes["gpu.example.com"]) > 3`, all: true},
		{expr: `f(device)`, all: true},
		{expr: `[device][0].attributes["gpu.example.com"].model == "a"`, all: true},
		{expr: `device.attributes[`, all: true},
	} {
		names, all := Expression(tc.expr)
		if all != tc.all || !slices.Equal(names, tc.names) {
			t.Errorf("%s: read %v (all %v), want %v (all %v)", tc.expr, names, all, tc.names, tc.all)
		}
	}
}

func selector(expr string) resourceapi.DeviceSelector {
	return resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}
}

func TestCollector(t *testing.T) {
	class := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
		selector(`device.driver == "gpu.example.com"`), selector(`device.attributes["gpu.example.com"].profile == "whole"`)}}}
	claim := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu",
				Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].memoryGiB >= 40`)}}},
			{Name: "nic", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "fast", DeviceClassName: "nic",
				Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["nic.example.com"].speed == 400`)}}}},
		},
		Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot"))}},
	}}
	var c Collector
	c.Class(class)
	c.ClaimSpec(claim)
	r := c.Reads(nil)
	for _, name := range []resourceapi.QualifiedName{"profile", "gpu.example.com/memoryGiB", "speed", "resource.kubernetes.io/pcieRoot", "pcieRoot"} {
		if !r.Has(name) {
			t.Errorf("%s not read; the set is %q", name, r.Key())
		}
	}
	for _, name := range []resourceapi.QualifiedName{"uuid", "gpu.example.com/uuid", "driver"} {
		if r.Has(name) {
			t.Errorf("%s read; the set is %q", name, r.Key())
		}
	}
	if !c.Covers(r, claim) || !c.CoversClass(r, class) {
		t.Error("the set does not cover what it was made of")
	}
	byUUID := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "one",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].uuid == "GPU-7"`)}}}}}}
	if c.Covers(r, byUUID) {
		t.Error("a claim selecting by uuid is covered by a set without it")
	}
	matching := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/numaNode"))}}}}
	if c.Covers(r, matching) {
		t.Error("a claim matching on numaNode is covered by a set without it")
	}

	// Sets of the same names have one key; Reset starts a new set.
	var again Collector
	again.ClaimSpec(claim)
	again.Class(class)
	if again.Reads(nil).Key() != r.Key() {
		t.Errorf("keys %q and %q of one set", again.Reads(nil).Key(), r.Key())
	}
	c.Reset()
	if got := c.Reads(nil); got.Key() != new(Collector).Reads(nil).Key() || got.Has("profile") {
		t.Errorf("after Reset the set is %q", got.Key())
	}

	// A claim that reads every attribute is not covered by the set, which
	// leaves it out; a class that does makes the set All.
	iterating := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "any",
		Exactly: &resourceapi.ExactDeviceRequest{Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].exists(k, k == "x")`)}}}}}}
	c.ClaimSpec(iterating)
	c.ClaimSpec(claim)
	if got := c.Reads(nil); got == All || got.Has("anything") || !got.Partial() || c.Covers(got, iterating) || !c.Accounts(got, iterating) || !c.Covers(got, claim) {
		t.Errorf("a claim iterating attributes gives %q (covers it %v, accounts for it %v), want the other claims' set, not covering it", got.Key(), c.Covers(got, iterating), c.Accounts(got, iterating))
	}
	c.Class(&resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{selector(`size(device.attributes["gpu.example.com"]) > 1`)}}})
	if got := c.Reads(nil); got != All || !got.Has("anything") || !got.HasAll([]string{"a", "b"}) || !c.Covers(got, iterating) {
		t.Errorf("a class reading every attribute gives %q, want all", got.Key())
	}
}

// Names claims read that leave says to leave out (an attribute every
// device has its own value of) are left out of the set: claims reading
// them are not covered, though the set accounts for them; a class's reads
// are never left out; a name the set never met is not accounted for.
func TestCollectorLeavesOut(t *testing.T) {
	byUUID := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "one",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].uuid == "GPU-7"`)}}}}}}
	byModel := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "one",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].model == "h100"`)}}}}}}
	bySerial := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/serial"))}}}}
	var c Collector
	c.ClaimSpec(byUUID)
	c.ClaimSpec(byModel)
	if got := c.ClaimsOnly(); !slices.Equal(got, []string{"model", "uuid"}) {
		t.Errorf("ClaimsOnly = %v", got)
	}
	leave := func(n string) bool { return n == "uuid" }
	r := c.Reads(leave)
	switch {
	case r.Has("uuid") || !r.Has("model"):
		t.Errorf("the set %q: want model, not uuid", r.Key())
	case c.Covers(r, byUUID) || !c.Accounts(r, byUUID):
		t.Error("the set covers a claim reading what it left out, or does not account for it")
	case !c.Covers(r, byModel):
		t.Error("the set does not cover a claim reading what it holds")
	case c.Accounts(r, bySerial):
		t.Error("the set accounts for a name it never met")
	case r.Key() == c.Reads(nil).Key():
		t.Error("a set leaving a name out has the key of one holding it")
	case !r.Partial() || c.Reads(nil).Partial():
		t.Errorf("Partial: %v leaving uuid out, %v holding it", r.Partial(), c.Reads(nil).Partial())
	}
	c.Class(&resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{selector(`device.attributes["gpu.example.com"].uuid != ""`)}}})
	if r := c.Reads(leave); !r.Has("uuid") || !c.Covers(r, byUUID) {
		t.Errorf("a name a class reads was left out: %q", r.Key())
	}
}

func TestIdentities(t *testing.T) {
	slice := func(node string, devs ...resourceapi.Device) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To(node), Devices: devs}}
	}
	dev := func(name string, attrs map[string]string) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
		for k, v := range attrs {
			d.Attributes[resourceapi.QualifiedName(k)] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
		}
		return d
	}
	node := func(n string) *resourceapi.ResourceSlice {
		return slice(n,
			dev("gpu-0", map[string]string{"gpu.example.com/uuid": "GPU-" + n + "-0", "index": "0", "resource.kubernetes.io/pcieRoot": "pci0", "model": "h100"}),
			dev("gpu-1", map[string]string{"gpu.example.com/uuid": "GPU-" + n + "-1", "index": "1", "resource.kubernetes.io/pcieRoot": "pci0", "model": "h100"}))
	}
	for _, tc := range []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		want   []string
	}{
		{name: "two nodes", slices: []*resourceapi.ResourceSlice{node("a"), node("b")}, want: []string{"uuid"}},
		// One node cannot tell a uuid from an index.
		{name: "one node", slices: []*resourceapi.ResourceSlice{node("a")}},
		{name: "slices of no node", slices: []*resourceapi.ResourceSlice{{Spec: resourceapi.ResourceSliceSpec{Devices: node("a").Spec.Devices}}, {Spec: resourceapi.ResourceSliceSpec{Devices: node("b").Spec.Devices}}}},
		// Attributes of one node's devices only: an index as well.
		{name: "attributes of one node", slices: []*resourceapi.ResourceSlice{node("a"), slice("b", dev("x", map[string]string{"serial": "1"}))}},
		{name: "a placeholder many share", slices: []*resourceapi.ResourceSlice{node("a"), node("b"), slice("c",
			dev("x", map[string]string{"serial": "unset"}), dev("y", map[string]string{"serial": "unset"}), dev("z", map[string]string{"serial": "7"}))}, want: []string{"uuid"}},
	} {
		got := Identities(tc.slices)
		var names []string
		for n, ok := range got {
			if ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: identities %v, want %v", tc.name, names, tc.want)
		}
	}
}
