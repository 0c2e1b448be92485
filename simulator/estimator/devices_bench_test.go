package estimator

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
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
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var classes []*resourceapi.DeviceClass
			for _, o := range scale.Classes() {
				c := o.(*resourceapi.DeviceClass)
				classes = append(classes, c)
				if err := r.Snapshot().SetDeviceClass(c); err != nil {
					b.Fatal(err)
				}
			}
			node, slices := kwok.NodeObjects(scale.Group("g", "p", tc.kind, 10), "template-g")
			tmpl := &cloudprovider.NodeTemplate{Node: node, ResourceSlices: slices}
			for b.Loop() {
				if _, err := NewDeviceCounter(r).Count(ctx, "g", tmpl, classes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
