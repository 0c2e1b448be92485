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
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	fragexpander "github.com/dra-autoscaler/dra-autoscaler/pkg/expander/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// slicedTemplate is a node with one GPU of n one-slice partitions.
func slicedTemplate(name string, n int) *cloudprovider.NodeTemplate {
	counters := builder.ResourceSlice(name+"-counters", name, driver, name).Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0").Counter("slices", fmt.Sprint(n)))
	devices := builder.ResourceSlice(name+"-devices", name, driver, name).Pool(1, 2)
	for i := range n {
		devices.Devices(builder.Device(fmt.Sprintf("gpu-0-slice-%d", i)).ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
	}
	return &cloudprovider.NodeTemplate{Node: builder.Node(name).CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{counters.Obj(), devices.Obj()}}
}

// Two 3-slice pods: a 7-slice GPU holds both and strands the slice left,
// a 6-slice GPU holds both exactly; the expander takes the 6-slice group
// although least-waste cannot tell them apart by devices used.
func TestStrandedFractionExpander(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, r.Snapshot(), builder.DeviceClass("gpu").Driver(driver).Obj(),
		builder.ClaimTemplate("ns", "s3").Request(builder.Request("gpu", "gpu").Count(3)).Obj())
	pods := []*corev1.Pod{builder.Pod("ns", "a").ClaimFromTemplate("dev", "s3").Obj(), builder.Pod("ns", "b").ClaimFromTemplate("dev", "s3").Obj()}
	shapes := fragmentation.NewShapes(time.Hour)
	now := time.Unix(0, 0)
	shapes.Observe(r.Snapshot(), pods, now)
	p := New(r, fragmentation.NewAnalyzer(r), shapes, config.DefaultSharing())
	p.Now = func() time.Time { return now }
	score := p.StrandedFraction(ctx, estimator.New(r, estimator.Options{}))
	options := []expander.Option{
		{NodeGroup: "mig-7", NodeCount: 1, Pods: pods, Template: slicedTemplate("mig-7", 7)},
		{NodeGroup: "mig-6", NodeCount: 1, Pods: pods, Template: slicedTemplate("mig-6", 6)},
	}
	if s7, s6 := score(options[0]), score(options[1]); !(s6 == 0 && s7 > 0) {
		t.Errorf("stranded fractions: 7-slice %.3f, 6-slice %.3f; want >0 and 0", s7, s6)
	}
	if r.Snapshot().Depth() != 0 || r.Snapshot().HasNode("mig-7-template-0") {
		t.Fatal("scoring left simulated nodes behind")
	}
	if got := (expander.Chain{fragexpander.New(score)}).Choose(options); got.NodeGroup != "mig-6" {
		t.Errorf("chose %s, want mig-6", got.NodeGroup)
	}
}
