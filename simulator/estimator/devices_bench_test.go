package estimator

import (
	"context"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/scale"
)

// BenchmarkDeviceCounter counts the devices of the L2 groups' templates
// from a cold memo: what the NodeGroup objects cost in a pass's first
// run.
//
//	go test -run '^$' -bench DeviceCounter -benchmem ./simulator/estimator/
func BenchmarkDeviceCounter(b *testing.B) {
	for _, tc := range []struct {
		name string
		kind scale.Kind
	}{{"plain", scale.Plain}, {"nics", scale.WithNICs}, {"partitionable", scale.Partitionable}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			r, classes := scaleRunner(ctx, b)
			tmpl := scaleTemplate("g", tc.kind)
			for b.Loop() {
				if _, err := NewDeviceCounter(r).Count(ctx, "g", tmpl, classes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
