package estimator

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/scale"
)

// deviceBound counts devices less what shared counters rule out, and
// never less than a request could hold.
func TestDeviceBound(t *testing.T) {
	n := "node"
	slice := func(pool string, devices ...*builder.DeviceBuilder) *builder.ResourceSliceBuilder {
		return builder.ResourceSlice(pool+"-devices", n, gpuDriver, pool).Devices(devices...)
	}
	counters := func(pool string, sets ...*builder.CounterSetBuilder) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(pool+"-counters", n, gpuDriver, pool).SharedCounters(sets...).Obj()
	}
	draw := func(name, set string, amounts map[string]string) *builder.DeviceBuilder {
		return builder.Device(name).ConsumesCounters(set, amounts)
	}
	for _, tc := range []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		want   int
	}{
		{"no slices", nil, 0},
		{"plain devices", []*resourceapi.ResourceSlice{slice("p", builder.Device("a"), builder.Device("b")).Obj()}, 2},
		// Two GPUs of 7 slices, each offered whole or as 7 slices.
		{"partitions", migTemplate().ResourceSlices, 14},
		{"the L2 partitionable template: 8 GPUs, whole or halves", scaleTemplate("g", scale.Partitionable).ResourceSlices, 16},
		{"the L2 template with NICs", scaleTemplate("g", scale.WithNICs).ResourceSlices, 16},
		{"counters in the devices' own slice", []*resourceapi.ResourceSlice{
			slice("p", draw("whole", "gpu", map[string]string{"mem": "80Gi"}), draw("half-0", "gpu", map[string]string{"mem": "40Gi"}),
				draw("half-1", "gpu", map[string]string{"mem": "40Gi"})).SharedCounters(builder.CounterSet("gpu").Counter("mem", "80Gi")).Obj()}, 2},
		{"fewer devices than the counters allow", []*resourceapi.ResourceSlice{counters("p", builder.CounterSet("gpu").Counter("mem", "80Gi")),
			slice("p", draw("a", "gpu", map[string]string{"mem": "10Gi"}), draw("b", "gpu", map[string]string{"mem": "20Gi"})).Obj()}, 2},
		{"the smallest draw decides", []*resourceapi.ResourceSlice{counters("p", builder.CounterSet("gpu").Counter("mem", "80Gi")),
			slice("p", draw("a", "gpu", map[string]string{"mem": "50Gi"}), draw("b", "gpu", map[string]string{"mem": "30Gi"}),
				draw("c", "gpu", map[string]string{"mem": "60Gi"}), draw("d", "gpu", map[string]string{"mem": "70Gi"})).Obj()}, 2},
		{"the tightest of two counters", []*resourceapi.ResourceSlice{
			counters("p", builder.CounterSet("gpu").Counter("mem", "80Gi").Counter("sm", "2")),
			slice("p", draw("a", "gpu", map[string]string{"mem": "10Gi", "sm": "1"}), draw("b", "gpu", map[string]string{"mem": "10Gi", "sm": "1"}),
				draw("c", "gpu", map[string]string{"mem": "10Gi", "sm": "1"})).Obj()}, 2},
		{"a fractional draw", []*resourceapi.ResourceSlice{counters("p", builder.CounterSet("gpu").Counter("c", "1")),
			slice("p", draw("a", "gpu", map[string]string{"c": "100m"}), draw("b", "gpu", map[string]string{"c": "100m"}),
				draw("c", "gpu", map[string]string{"c": "300m"})).Obj()}, 3},
		{"a set the pool does not publish counts each device", []*resourceapi.ResourceSlice{counters("other", builder.CounterSet("gpu").Counter("c", "1")),
			slice("p", draw("a", "gpu", map[string]string{"c": "1"}), draw("b", "gpu", map[string]string{"c": "1"})).Obj()}, 2},
		{"a draw of nothing counts the device", []*resourceapi.ResourceSlice{counters("p", builder.CounterSet("gpu").Counter("c", "1")),
			slice("p", draw("a", "gpu", map[string]string{"c": "0"}), draw("b", "gpu", map[string]string{"c": "0"})).Obj()}, 2},
		{"a draw past the capacity never fits", []*resourceapi.ResourceSlice{counters("p", builder.CounterSet("gpu").Counter("c", "1")),
			slice("p", draw("a", "gpu", map[string]string{"c": "2"}), builder.Device("plain")).Obj()}, 1},
		{"one set per GPU", []*resourceapi.ResourceSlice{
			counters("p", builder.CounterSet("gpu-0").Counter("c", "1"), builder.CounterSet("gpu-1").Counter("c", "1")),
			slice("p", draw("a", "gpu-0", map[string]string{"c": "1"}), draw("b", "gpu-0", map[string]string{"c": "1"}),
				draw("c", "gpu-1", map[string]string{"c": "1"})).Obj()}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deviceBound(tc.slices); got != tc.want {
				t.Errorf("bound %d, want %d", got, tc.want)
			}
		})
	}
}
