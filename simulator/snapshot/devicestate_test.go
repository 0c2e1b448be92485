package snapshot

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A node's DeviceState names the allocations that may hold its devices:
// the same after a rebuild from equal claims, changed by any allocation
// pinned to the node (in its print) or pinned to none (in the shared one),
// untouched by another node's or an admin-access one, and back after a
// revert or once the allocation is gone again.
func TestDeviceState(t *testing.T) {
	const driver = "gpu.example.com"
	slice := builder.ResourceSlice("n1-gpus", "n1", driver, "n1").Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	claim := func(name, node string, devices ...string) *resourceapi.ResourceClaim {
		var results []resourceapi.DeviceRequestAllocationResult
		for _, d := range devices {
			results = append(results, builder.AllocatedDevice("gpu", driver, node, d))
		}
		return builder.Claim("ns", name).Request(builder.Request("gpu", "gpu")).Allocated(node, results...).Obj()
	}
	s := newTestSnapshot(t)
	build := func(claims ...*resourceapi.ResourceClaim) DeviceState {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.AddNode(builder.Node("n1").Obj()))
		mustOK(t, s.AddNode(builder.Node("n2").Obj()))
		mustOK(t, s.SetResourceSlice(slice))
		for _, c := range claims {
			mustOK(t, s.SetResourceClaim(c))
		}
		return s.DeviceState("n1")
	}
	same := func(a, b DeviceState) bool {
		return slices.Equal(a.Slices, b.Slices) && a.Node == b.Node && a.Shared == b.Shared
	}
	base := build(claim("a", "n1", "gpu-0"))
	if !slices.Equal(base.Slices, []*resourceapi.ResourceSlice{slice}) {
		t.Fatalf("Slices = %v, want the node's one slice", base.Slices)
	}
	admin := claim("admin", "n1", "gpu-1")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	unpinned := claim("u", "n1", "gpu-1")
	unpinned.Status.Allocation.NodeSelector = nil
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		same   bool
	}{
		{"an equal claim", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-0")}, true},
		{"another claim, the same device", []*resourceapi.ResourceClaim{claim("b", "n1", "gpu-0")}, true},
		{"another device", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-1")}, false},
		{"one more device", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-0", "gpu-1")}, false},
		{"nothing allocated", nil, false},
		{"another node's allocation besides", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-0"), claim("x", "n2", "gpu-0")}, true},
		{"an admin-access allocation besides", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-0"), admin}, true},
		{"an allocation pinned to no node besides", []*resourceapi.ResourceClaim{claim("a", "n1", "gpu-0"), unpinned}, false},
	} {
		if got := build(tc.claims...); same(got, base) != tc.same {
			t.Errorf("%s: DeviceState %+v, first %+v: same %v, want %v", tc.name, got, base, !tc.same, tc.same)
		}
	}

	// Within a pass: a fork's allocation changes the print, the revert
	// brings it back, and so does removing the claim.
	build(claim("a", "n1", "gpu-0"))
	s.Fork()
	mustOK(t, s.SetResourceClaim(claim("c", "n1", "gpu-1")))
	if same(s.DeviceState("n1"), base) {
		t.Error("an allocation in a fork left the print as it was")
	}
	mustOK(t, s.Revert())
	if !same(s.DeviceState("n1"), base) {
		t.Error("the revert did not bring the print back")
	}
	mustOK(t, s.SetResourceClaim(claim("c", "n1", "gpu-1")))
	mustOK(t, s.RemoveResourceClaim("ns", "c"))
	if !same(s.DeviceState("n1"), base) {
		t.Error("a claim added and removed left the print changed")
	}
}
