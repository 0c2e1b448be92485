package kwok

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
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
