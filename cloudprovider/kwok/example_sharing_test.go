package kwok

import (
	"testing"

	"k8s.io/utils/ptr"
)

// The sharing example loads and publishes what the API requires: per
// node one pool, counters in a slice of their own, every slice valid.
func TestSharingExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("../../deploy/examples/kwok-sharing.yaml")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	e := newEnv(t, cfg)
	tests := []struct {
		group             string
		slices, devices   int
		counterSlice      bool
		sharedWithCapcity bool
	}{
		{group: "gpu-mig-7", slices: 2, devices: 8, counterSlice: true},
		{group: "gpu-split-4-3", slices: 2, devices: 3, counterSlice: true},
		{group: "gpu-shared-80g", slices: 1, devices: 1, sharedWithCapcity: true},
	}
	groups := e.p.NodeGroups()
	if len(groups) != len(tests) {
		t.Fatalf("%d node groups, want %d", len(groups), len(tests))
	}
	for i, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			g := groups[i]
			if g.Id() != tc.group {
				t.Fatalf("group %d is %s, want %s", i, g.Id(), tc.group)
			}
			tmpl, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatal(err)
			}
			if len(tmpl.ResourceSlices) != tc.slices {
				t.Fatalf("%d slices, want %d", len(tmpl.ResourceSlices), tc.slices)
			}
			devices := 0
			for _, s := range tmpl.ResourceSlices {
				checkValidSlice(t, s)
				if s.Spec.Pool.Name != tmpl.Node.Name || s.Spec.Pool.ResourceSliceCount != int64(tc.slices) {
					t.Errorf("slice %s in pool %s of %d slices, want the node's pool of %d", s.Name, s.Spec.Pool.Name, s.Spec.Pool.ResourceSliceCount, tc.slices)
				}
				if len(s.Spec.SharedCounters) > 0 && len(s.Spec.Devices) > 0 {
					t.Errorf("slice %s mixes counters and devices", s.Name)
				}
				devices += len(s.Spec.Devices)
				for _, d := range s.Spec.Devices {
					if tc.sharedWithCapcity && (!ptr.Deref(d.AllowMultipleAllocations, false) || d.Capacity["memory"].RequestPolicy == nil) {
						t.Errorf("device %s is not shared with a memory request policy", d.Name)
					}
				}
			}
			if tc.counterSlice && len(tmpl.ResourceSlices[0].Spec.SharedCounters) != 1 {
				t.Errorf("first slice has %d counter sets, want 1", len(tmpl.ResourceSlices[0].Spec.SharedCounters))
			}
			if devices != tc.devices {
				t.Errorf("%d devices, want %d", devices, tc.devices)
			}
		})
	}
}
