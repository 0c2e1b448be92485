package fragmentation

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns        = "default"
	gpuDriver = "gpu.example.com"
)

// slices is the counter resource of the 7-slice GPU of migNode.
var slicesRes = CounterResource(gpuDriver, "slices")

func newRunner(tb testing.TB) (*framework.Runner, context.Context) {
	tb.Helper()
	var ctx context.Context
	if t, ok := tb.(*testing.T); ok {
		_, ctx = ktesting.NewTestContext(t)
	} else {
		// Benchmarks: the framework logs at V(4) per cycle; keep it quiet.
		ctx = klog.NewContext(context.Background(), klog.Background().V(1))
	}
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		tb.Fatalf("framework.New: %v", err)
	}
	return r, ctx
}

// profile selects the devices of migNode by their profile attribute.
func profile(name, p string) *builder.RequestBuilder {
	return builder.Request(name, "gpu").Selector(fmt.Sprintf(`device.attributes[%q].profile == %q`, gpuDriver, p))
}

// base is the device class and the claim templates of the tests: "s<k>"
// asks for k one-slice partitions, "whole" for the whole GPU, "whole-or-2"
// for the whole GPU or else two slices.
func base() []any {
	objs := []any{builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.ClaimTemplate(ns, "whole").Request(profile("gpu", "whole")).Obj(),
		builder.ClaimTemplate(ns, "whole-or-2").Request(builder.FirstAvailable("gpu",
			profile("whole", "whole"), profile("two", "1g").Count(2))).Obj(),
		builder.ClaimTemplate(ns, "mem20").Request(builder.Request("gpu", "gpu").Capacity("memory", "20Gi")).Obj(),
	}
	for k := 1; k <= 7; k++ {
		objs = append(objs, builder.ClaimTemplate(ns, fmt.Sprintf("s%d", k)).Request(profile("gpu", "1g").Count(int64(k))).Obj())
	}
	return objs
}

// migNode is a node with one GPU of 7 slices (shared counters), offered
// whole or as seven one-slice partitions: the kwok example's gpu-mig-7.
func migNode(name string) []any {
	counters := builder.ResourceSlice(name+"-counters", name, gpuDriver, name).Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7"))
	devices := builder.ResourceSlice(name+"-devices", name, gpuDriver, name).Pool(1, 2).
		Devices(builder.Device("gpu-0").Attr("profile", "whole").ConsumesCounters("gpu-0", map[string]string{"slices": "7"}))
	for i := range 7 {
		devices.Devices(builder.Device(fmt.Sprintf("gpu-0-slice-%d", i)).Attr("profile", "1g").
			ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
	}
	return []any{builder.Node(name).CPU("64").Memory("256Gi").Obj(), counters.Obj(), devices.Obj()}
}

// sharedNode has one GPU whose 80Gi of memory claims share.
func sharedNode(name string) []any {
	s := builder.ResourceSlice(name+"-gpu", name, gpuDriver, name).Devices(
		builder.Device("gpu-0").AllowMultipleAllocations().CapacityPolicy("memory", "80Gi", "10Gi", "1Gi"))
	return []any{builder.Node(name).CPU("64").Memory("256Gi").Obj(), s.Obj()}
}

// plainNode has n GPUs allocated whole.
func plainNode(name string, n int) []any {
	s := builder.ResourceSlice(name+"-gpu", name, gpuDriver, name)
	for i := range n {
		s.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)))
	}
	return []any{builder.Node(name).CPU("64").Memory("256Gi").Obj(), s.Obj()}
}

// place schedules a pod using template tmpl on node and fails unless it lands.
func place(tb testing.TB, ctx context.Context, r *framework.Runner, name, tmpl, node string) *v1.Pod {
	tb.Helper()
	pod := builder.Pod(ns, name).ClaimFromTemplate("dev", tmpl).Obj()
	p, err := r.SchedulePod(ctx, pod, []string{node})
	if err != nil {
		tb.Fatal(err)
	}
	if p.Node != node {
		tb.Fatalf("pod %s (%s) not placed on %s: %+v", name, tmpl, node, p.Results)
	}
	return pod
}

// shapes returns the shapes of the named templates.
func shapes(tb testing.TB, r *framework.Runner, names ...string) []*Shape {
	tb.Helper()
	var out []*Shape
	for _, n := range names {
		t, ok := r.Snapshot().ResourceClaimTemplate(ns, n)
		if !ok {
			tb.Fatalf("no template %s", n)
		}
		out = append(out, NewShape(t.Spec.Spec))
	}
	SortShapes(out)
	return out
}

func load(tb testing.TB, r *framework.Runner, objs ...[]any) {
	tb.Helper()
	all := base()
	for _, o := range objs {
		all = append(all, o...)
	}
	snapshottest.Load(tb, r.Snapshot(), all...)
}

// plainTemplates are "g<k>": k whole devices of class gpu.
func plainTemplates() []any {
	var out []any
	for k := 1; k <= 4; k++ {
		out = append(out, builder.ClaimTemplate(ns, fmt.Sprintf("g%d", k)).Request(builder.Request("gpu", "gpu").Count(int64(k))).Obj())
	}
	return out
}

func podFor(name, tmpl string) *v1.Pod {
	return builder.Pod(ns, name).ClaimFromTemplate("dev", tmpl).Obj()
}
