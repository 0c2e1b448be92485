package placement

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const driver = "gpu.example.com"

func migTemplate(withWhole bool) *cloudprovider.NodeTemplate {
	counters := builder.ResourceSlice("t-counters", "t", driver, "t").Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7"))
	devices := builder.ResourceSlice("t-devices", "t", driver, "t").Pool(1, 2)
	if withWhole {
		devices.Devices(builder.Device("gpu-0").Attr("profile", "whole").ConsumesCounters("gpu-0", map[string]string{"slices": "7"}))
	}
	for i := range 7 {
		devices.Devices(builder.Device(fmt.Sprintf("gpu-0-slice-%d", i)).Attr("profile", "1g").
			ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
	}
	return &cloudprovider.NodeTemplate{Node: builder.Node("t").CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{counters.Obj(), devices.Obj()}}
}

func TestPreferFirstAlternative(t *testing.T) {
	profile := func(name, p string) *builder.RequestBuilder {
		return builder.Request(name, "gpu").Selector(fmt.Sprintf(`device.attributes[%q].profile == %q`, driver, p))
	}
	tests := []struct {
		policy     string
		withWhole  bool
		wantCutTo1 bool
	}{
		{config.PrioritizedListPreferFirstAlternative, true, true},
		{config.PrioritizedListPreferFirstAlternative, false, false}, // no group has a whole GPU
		{config.PrioritizedListScheduler, true, false},
		{config.PrioritizedListPreferExisting, true, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/whole=%v", tc.policy, tc.withWhole), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			claim := builder.Claim("ns", "c").Request(builder.FirstAvailable("gpu", profile("whole", "whole"), profile("two", "1g").Count(2))).Obj()
			snapshottest.Load(t, r.Snapshot(), builder.DeviceClass("gpu").Driver(driver).Obj(), claim)
			pod := builder.Pod("ns", "p").Claim("dev", "c").Obj()
			p := New(r, fragmentation.NewAnalyzer(r), fragmentation.NewShapes(time.Hour), config.SharingOptions{PrioritizedListPolicy: tc.policy})
			out := p.PreferFirstAlternative(ctx, []*corev1.Pod{pod}, []*cloudprovider.NodeTemplate{migTemplate(tc.withWhole)})
			if len(out) != 1 || r.Snapshot().Depth() != 0 {
				t.Fatalf("%d pods back, snapshot depth %d", len(out), r.Snapshot().Depth())
			}
			got, _ := r.Snapshot().ResourceClaim("ns", "c")
			cut := got.Spec.Devices.Requests[0].Exactly != nil
			if cut != tc.wantCutTo1 {
				t.Errorf("claim cut to its first alternative = %v, want %v (%+v)", cut, tc.wantCutTo1, got.Spec.Devices.Requests)
			}
		})
	}
}
