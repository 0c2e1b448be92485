package snapshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// LocalDevices reads the same after a Reset whether the next build adds
// the same slice objects (their facts are kept) or copies of them, and
// tells apart a slice that changed or a device allocated since.
func TestLocalDevicesAcrossResets(t *testing.T) {
	const driver = "gpu.example.com"
	slice := func(model string) *resourceapi.ResourceSlice {
		return builder.ResourceSlice("n1-gpus", "n1", driver, "n1").
			Devices(builder.Device("gpu-0").Attr("model", model), builder.Device("gpu-1").Attr("model", model)).Obj()
	}
	allocated := builder.Claim("ns", "c").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", driver, "n1", "gpu-1")).Obj()
	shared := builder.ResourceSlice("n1-shared", "n1", driver, "n1-shared").Devices(builder.Device("gpu-2").AllowMultipleAllocations()).Obj()
	kept := slice("a100")
	s := newTestSnapshot(t)
	build := func(sl *resourceapi.ResourceSlice, claimed bool) (LocalDevices, bool) {
		t.Helper()
		mustOK(t, s.Reset())
		mustOK(t, s.AddNode(builder.Node("n1").Obj()))
		mustOK(t, s.SetResourceSlice(sl))
		if claimed {
			mustOK(t, s.SetResourceClaim(allocated))
		}
		return s.LocalDevices("n1")
	}
	first, ok := build(kept, true)
	if !ok || len(first.Slices) != 1 || !cmp.Equal(first.Used, []string{"0/gpu-1"}) {
		t.Fatalf("LocalDevices = %+v, %v; want one slice with gpu-1 used", first, ok)
	}
	tests := []struct {
		name      string
		slice     *resourceapi.ResourceSlice
		claimed   bool
		wantSame  bool
		wantNotOK bool
	}{
		{name: "the same slice object", slice: kept, claimed: true, wantSame: true},
		{name: "an equal copy", slice: slice("a100"), claimed: true, wantSame: true},
		{name: "the same object, nothing allocated", slice: kept},
		{name: "a changed slice", slice: slice("h100"), claimed: true},
		{name: "a device shared between claims", slice: shared, wantNotOK: true},
		{name: "the same object again", slice: kept, claimed: true, wantSame: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := build(tc.slice, tc.claimed)
			if ok == tc.wantNotOK {
				t.Fatalf("ok = %v, want %v", ok, !tc.wantNotOK)
			}
			if !tc.wantNotOK && cmp.Equal(got, first) != tc.wantSame {
				t.Errorf("LocalDevices = %+v, first build %+v; want equal: %v", got, first, tc.wantSame)
			}
		})
	}
}
