package estimator

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The devices of a class one request gets on a new node are the real
// allocator's answer with the class's own selectors: partitions drawing
// on one GPU's counters count as far as the counters go, tainted devices
// not at all, classes matching nothing are left out.
func TestDeviceCounter(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	classes := []*resourceapi.DeviceClass{
		builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.DeviceClass("whole").Driver(gpuDriver).Selector(`device.attributes["` + gpuDriver + `"].profile == "7g"`).Obj(),
		builder.DeviceClass("slice").Driver(gpuDriver).Selector(`device.attributes["` + gpuDriver + `"].profile == "1g"`).Obj(),
		builder.DeviceClass("nic").Driver("nic.example.com").Obj(),
	}
	for _, c := range classes {
		if err := r.Snapshot().SetDeviceClass(c); err != nil {
			t.Fatal(err)
		}
	}
	n := template.PlaceholderNodeName
	plain := func(devices ...*builder.DeviceBuilder) *cloudprovider.NodeTemplate {
		return &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{
			builder.ResourceSlice("g", n, gpuDriver, n).Devices(devices...).Obj()}}
	}
	for _, tc := range []struct {
		name string
		tmpl *cloudprovider.NodeTemplate
		want map[string]int
	}{
		// 2 GPUs of 7 slices, each offered whole (7g) or as 7 slices (1g):
		// 16 devices match "gpu", at most 14 go to one request.
		{"partitionable", migTemplate(), map[string]int{"gpu": 14, "whole": 2, "slice": 14}},
		{"plain", plain(builder.Device("gpu-0").Attr("profile", "7g"), builder.Device("gpu-1").Attr("profile", "7g")),
			map[string]int{"gpu": 2, "whole": 2}},
		{"a tainted device is not offered", plain(builder.Device("gpu-0").Attr("profile", "1g"),
			builder.Device("gpu-1").Attr("profile", "1g").Taint("broken", "", resourceapi.DeviceTaintEffectNoSchedule)),
			map[string]int{"gpu": 1, "slice": 1}},
		{"no devices", &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("8").Obj()}, map[string]int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDeviceCounter(r)
			got, err := d.Count(ctx, "g", tc.tmpl, classes)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			for c, w := range tc.want {
				if got[c] != w {
					t.Errorf("class %s: %d devices, want %d (all: %v)", c, got[c], w, got)
				}
			}
			calls := d.Calls
			if _, err := d.Count(ctx, "g", tc.tmpl, classes); err != nil || d.Calls != calls {
				t.Errorf("the same template was counted again (%d -> %d calls, err %v)", calls, d.Calls, err)
			}
			if nodes, _ := r.Snapshot().NodeInfos().List(); len(nodes) != 0 {
				t.Errorf("snapshot keeps %d nodes", len(nodes))
			}
		})
	}
	// A class that changes is counted again.
	d := NewDeviceCounter(r)
	tmpl := plain(builder.Device("gpu-0").Attr("profile", "7g"))
	if _, err := d.Count(ctx, "g", tmpl, classes); err != nil {
		t.Fatal(err)
	}
	calls := d.Calls
	changed := append([]*resourceapi.DeviceClass{}, classes...)
	changed[0] = changed[0].DeepCopy()
	changed[0].ResourceVersion = "2"
	if _, err := d.Count(ctx, "g", tmpl, changed); err != nil || d.Calls == calls {
		t.Errorf("a changed class was not counted again (err %v)", err)
	}
}
