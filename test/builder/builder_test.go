package builder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

func TestObjReturnsIndependentCopies(t *testing.T) {
	nb := Node("n1").Label("zone", "a")
	first := nb.Obj()
	nb.Label("zone", "b")
	if got := first.Labels["zone"]; got != "a" {
		t.Errorf("node returned before a change saw it: zone=%q", got)
	}
	cb := Claim("ns", "c").Request(Request("gpu", "gpu-class"))
	c1 := cb.Obj()
	c1.Spec.Devices.Requests[0].Exactly.Count = 5
	if got := cb.Obj().Spec.Devices.Requests[0].Exactly.Count; got != 1 {
		t.Errorf("mutating a returned claim changed the builder: count=%d", got)
	}
}

func TestBuilders(t *testing.T) {
	pod := Pod("ns", "p").CPU("1").Request("example.com/gpu", "2").
		ClaimFromTemplate("gpu", "tmpl").Claim("shared", "c1").PodGroup("pg").Priority(10).Obj()
	slice := ResourceSlice("s", "n1", "gpu.example.com", "n1").
		SharedCounters(CounterSet("gpu-0").Counter("slices", "7")).
		Devices(Device("gpu-0").Attr("index", 0).Attr("model", "a100").Attr("healthy", true).
			VersionAttr("driverVersion", "1.2.3").Capacity("memory", "80Gi").
			ConsumesCounters("gpu-0", map[string]string{"slices": "7"}).AllowMultipleAllocations()).Obj()
	tmpl := ClaimTemplate("ns", "t").Request(
		Request("gpu", "gpu").Count(2).Selector("true").Capacity("memory", "1Gi").Tolerate("k", "", ""),
		FirstAvailable("nic", Request("fast", "nic-fast"), Request("slow", "nic-slow").All()),
	).MatchAttribute("resource.kubernetes.io/pcieRoot").Obj()
	pg := PodGroup("ns", "pg").MinCount(3).TopologyKey("rack").Obj()

	tests := []struct {
		name string
		ok   bool
	}{
		{"pod extended resource has a limit", pod.Spec.Containers[0].Resources.Limits.Name("example.com/gpu", "").Value() == 2},
		{"pod cpu has no limit", func() bool { _, ok := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; return !ok }()},
		{"pod claims referenced by container", len(pod.Spec.Containers[0].Resources.Claims) == 2},
		{"pod group", *pod.Spec.SchedulingGroup.PodGroupName == "pg"},
		{"int attribute", *slice.Spec.Devices[0].Attributes["index"].IntValue == 0},
		{"string attribute", *slice.Spec.Devices[0].Attributes["model"].StringValue == "a100"},
		{"bool attribute", *slice.Spec.Devices[0].Attributes["healthy"].BoolValue},
		{"version attribute", *slice.Spec.Devices[0].Attributes["driverVersion"].VersionValue == "1.2.3"},
		{"slice on node", *slice.Spec.NodeName == "n1"},
		{"counter", slice.Spec.SharedCounters[0].Counters["slices"].Value.Equal(quantity("7"))},
		{"exact request defaulted", tmpl.Spec.Spec.Devices.Requests[0].Exactly.Count == 2 &&
			tmpl.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount},
		{"toleration exists", tmpl.Spec.Spec.Devices.Requests[0].Exactly.Tolerations[0].Operator == resourceapi.DeviceTolerationOpExists},
		{"first available", len(tmpl.Spec.Spec.Devices.Requests[1].FirstAvailable) == 2 &&
			tmpl.Spec.Spec.Devices.Requests[1].FirstAvailable[1].AllocationMode == resourceapi.DeviceAllocationModeAll},
		{"constraint", string(*tmpl.Spec.Spec.Devices.Constraints[0].MatchAttribute) == "resource.kubernetes.io/pcieRoot"},
		{"gang", pg.Spec.SchedulingPolicy.Gang.MinCount == 3 && pg.Spec.SchedulingPolicy.Basic == nil},
		{"class selector", DeviceClass("gpu").Driver("gpu.example.com").Obj().Spec.Selectors[0].CEL.Expression == `device.driver == "gpu.example.com"`},
		{"bad quantity is zero, not a panic", Node("n").CPU("lots").Obj().Status.Allocatable.Cpu().IsZero()},
	}
	for _, tc := range tests {
		if !tc.ok {
			t.Errorf("%s: not as expected", tc.name)
		}
	}
}
