package stranded

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const driver = "gpu.example.com"

func migNode(name string) []any {
	counters := builder.ResourceSlice(name+"-counters", name, driver, name).Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7"))
	devices := builder.ResourceSlice(name+"-devices", name, driver, name).Pool(1, 2)
	for i := range 7 {
		devices.Devices(builder.Device(fmt.Sprintf("gpu-0-slice-%d", i)).ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
	}
	return []any{builder.Node(name).CPU("8").Obj(), counters.Obj(), devices.Obj()}
}

func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := []any{builder.DeviceClass("gpu").Driver(driver).Obj(),
		builder.ClaimTemplate("ns", "s5").Request(builder.Request("gpu", "gpu").Count(5)).Obj(),
		builder.ClaimTemplate("ns", "s3").Request(builder.Request("gpu", "gpu").Count(3)).Obj()}
	objs = append(append(append(objs, migNode("n1")...), migNode("n2")...), migNode("lone")...)
	snapshottest.Load(t, r.Snapshot(), objs...)
	running := builder.Pod("ns", "running").ClaimFromTemplate("dev", "s5").Obj()
	if p, err := r.SchedulePod(ctx, running, []string{"n1"}); err != nil || p.Node != "n1" {
		t.Fatalf("setup: %v %v", p, err)
	}
	placed, _ := r.Snapshot().PlacedPod("ns", "running")
	pending := builder.Pod("ns", "pending").ClaimFromTemplate("dev", "s3").Obj()

	m := metrics.New()
	now := time.Unix(1000, 0)
	s := New(fragmentation.NewAnalyzer(r), fragmentation.NewShapes(time.Hour), time.Minute, m.Sharing)
	in := MeterInput{Snapshot: r.Snapshot(), Pods: []*corev1.Pod{placed, pending}, Nodes: []string{"n1", "n2", "lone"},
		GroupOf: map[string]string{"n1": "g", "n2": "g"}}
	rep := s.Run(ctx, in, now)
	slices := fragmentation.CounterResource(driver, "slices")
	g := rep.Groups["g"]
	// n1: 2 free, unusable by shapes of 5 or 3 slices; n2: 7 free, best
	// packed as 3+3, which leaves 1.
	if g.Total[slices] != 14 || g.Free[slices] != 9 || g.Stranded[slices] != 3 {
		t.Errorf("group g: total %v free %v stranded %v, want 14, 9, 3", g.Total, g.Free, g.Stranded)
	}
	if rep.Groups[""].Free[slices] != 7 {
		t.Errorf("nodes of no group: %+v", rep.Groups[""])
	}
	for _, tc := range []struct {
		vec  string
		want float64
	}{{"free", 9}, {"stranded", 3}} {
		vec := m.Sharing.FreeCapacity
		if tc.vec == "stranded" {
			vec = m.Sharing.StrandedCapacity
		}
		if got := testutil.ToFloat64(vec.WithLabelValues("g", string(slices))); got != tc.want {
			t.Errorf("%s capacity metric = %v, want %v", tc.vec, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(m.Sharing.RequestShapes); got != 2 {
		t.Errorf("request shapes = %v, want 2", got)
	}

	// A budget spent after one node: the others keep their figures and
	// the next pass goes on from the next node.
	tick := now
	s.clock = func() time.Time { tick = tick.Add(time.Hour); return tick }
	rep = s.Run(ctx, in, now)
	if rep.Measured != 1 || len(rep.Nodes) != 3 {
		t.Errorf("measured %d of %d nodes reported, want 1 of 3", rep.Measured, len(rep.Nodes))
	}
	if s.cursor != 1 {
		t.Errorf("cursor %d, want 1", s.cursor)
	}
	// Gone nodes are dropped.
	in.Nodes = []string{"n1"}
	s.clock = time.Now
	if rep = s.Run(ctx, in, now); len(rep.Nodes) != 1 {
		t.Errorf("%d nodes reported after two went away", len(rep.Nodes))
	}
}
