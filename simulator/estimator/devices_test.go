package estimator

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/scale"
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
			d := uncutCounter(r)
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
	d := uncutCounter(r)
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

// uncutCounter is a DeviceCounter whose probes are not cut short: the
// counts these tests want must not depend on how loaded the machine is
// (under -race beside the e2e tests a 50 ms probe was cut, and a device
// went uncounted). TestDeviceCounterRecountsCutProbes tests the cut.
func uncutCounter(r *framework.Runner) *DeviceCounter {
	d := NewDeviceCounter(r)
	d.timeout = time.Hour
	return d
}

// DeviceTaintRules change what the allocator grants on a template's
// devices without changing the template: the counts follow the rules in
// the snapshot, and a set of rules seen before is answered from the memo.
func TestDeviceCounterFollowsTaintRules(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := r.Snapshot()
	classes := []*resourceapi.DeviceClass{builder.DeviceClass("gpu").Driver(gpuDriver).Obj()}
	if err := snap.SetDeviceClass(classes[0]); err != nil {
		t.Fatal(err)
	}
	n := template.PlaceholderNodeName
	tmpl := &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{
		builder.ResourceSlice("g", n, gpuDriver, n).Devices(builder.Device("gpu-0"), builder.Device("gpu-1"), builder.Device("gpu-2")).Obj()}}
	broken := builder.DeviceTaintRule("broken", "broken", "", resourceapi.DeviceTaintEffectNoSchedule).Driver(gpuDriver).Device("gpu-1").Obj()
	everything := builder.DeviceTaintRule("broken", "broken", "", resourceapi.DeviceTaintEffectNoSchedule).Driver(gpuDriver).Obj()
	noted := builder.DeviceTaintRule("noted", "noted", "", resourceapi.DeviceTaintEffectNone).Obj()
	d := uncutCounter(r)
	// Each step sets the snapshot's rules to rules, then counts.
	for _, step := range []struct {
		name    string
		rules   []*resourceapi.DeviceTaintRule
		want    int
		counted bool // probes ran (the memo did not answer)
	}{
		{"no rules", nil, 3, true},
		{"the same, again", nil, 3, false},
		{"a rule taints one device", []*resourceapi.DeviceTaintRule{broken}, 2, true},
		{"the rule taints every device", []*resourceapi.DeviceTaintRule{everything}, 0, true},
		{"a rule with no effect is a rule still", []*resourceapi.DeviceTaintRule{everything, noted}, 0, true},
		{"the rules gone: the first count stands", nil, 3, false},
		{"one device tainted again", []*resourceapi.DeviceTaintRule{broken}, 2, false},
	} {
		for _, old := range snap.DeviceTaintRules() {
			if err := snap.RemoveDeviceTaintRule(old.Name); err != nil {
				t.Fatal(err)
			}
		}
		for _, rule := range step.rules {
			if err := snap.SetDeviceTaintRule(rule); err != nil {
				t.Fatal(err)
			}
		}
		calls := d.Calls
		got, err := d.Count(ctx, "g", tmpl, classes)
		if err != nil {
			t.Fatal(err)
		}
		if got["gpu"] != step.want {
			t.Errorf("%s: %d devices, want %d", step.name, got["gpu"], step.want)
		}
		if counted := d.Calls > calls; counted != step.counted {
			t.Errorf("%s: counted through the framework: %v, want %v", step.name, counted, step.counted)
		}
	}
}

// largestCount finds every largest count with at most two probes that do
// not fit, the dear kind, and never probes past the bound.
func TestLargestCount(t *testing.T) {
	for _, bound := range []int{1, 2, 7, 8, 24, 100} {
		for max := 0; max <= bound; max++ {
			misses := 0
			got, err := largestCount(bound, func(n int) (bool, error) {
				if n < 1 || n > bound {
					t.Fatalf("bound %d: probed %d", bound, n)
				}
				if n > max {
					misses++
				}
				return n <= max, nil
			})
			if err != nil || got != max || misses > 2 {
				t.Errorf("bound %d, max %d: got %d (err %v) with %d probes that did not fit", bound, max, got, err, misses)
			}
		}
	}
}

// Groups whose templates differ only in node and pool names share their
// counts; a template whose devices differ is counted on its own. The
// issue-16 L2 partitionable template gives its 16 halves with probes that
// all fit (1, 2, 4, 8, 16 GPU devices, then one NIC), none of the dear
// kind that has to try every combination: its counters bound it at 16.
// The timeout is long so that a probe past the bound would show.
func TestDeviceCounterSharesTemplates(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, classes := scaleRunner(ctx, t)
	d := NewDeviceCounter(r)
	d.timeout = time.Minute
	for _, tc := range []struct {
		group  string
		kind   scale.Kind
		want   map[string]int
		probes int
	}{
		{"a", scale.Partitionable, map[string]int{"gpu": 16}, 6},
		{"b", scale.Partitionable, map[string]int{"gpu": 16}, 0},
		// 16 devices: 1, 2, 4, 8, 16 and 9 per class.
		{"c", scale.WithNICs, map[string]int{"gpu": 8, "nic": 8}, 12},
		{"d", scale.WithNICs, map[string]int{"gpu": 8, "nic": 8}, 0},
		{"e", scale.Plain, map[string]int{"gpu": 8}, 5},
	} {
		calls := d.Calls
		got, err := d.Count(ctx, tc.group, scaleTemplate(tc.group, tc.kind), classes)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("group %s: got %v, want %v", tc.group, got, tc.want)
		}
		if probes := d.Calls - calls; probes != tc.probes {
			t.Errorf("group %s: %d probes, want %d", tc.group, probes, tc.probes)
		}
	}
}

// Counts that a cut probe decided are made again after recountAfter;
// the others stand.
func TestDeviceCounterRecountsCutProbes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	class := builder.DeviceClass("gpu").Driver(gpuDriver).Obj()
	if err := r.Snapshot().SetDeviceClass(class); err != nil {
		t.Fatal(err)
	}
	n := template.PlaceholderNodeName
	tmpl := &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{
		builder.ResourceSlice("g", n, gpuDriver, n).Devices(builder.Device("gpu-0")).Obj()}}
	for _, tc := range []struct {
		name      string
		timeout   time.Duration
		recounted bool
	}{
		{"every probe cut", time.Nanosecond, true},
		{"no probe cut", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
			d := NewDeviceCounter(r)
			d.timeout, d.now = tc.timeout, func() time.Time { return now }
			if _, err := d.Count(ctx, "g", tmpl, []*resourceapi.DeviceClass{class}); err != nil {
				t.Fatal(err)
			}
			if cut := d.TimedOut > 0; cut != tc.recounted {
				t.Fatalf("%d probes cut", d.TimedOut)
			}
			calls := d.Calls
			now = now.Add(recountAfter - time.Second)
			if _, err := d.Count(ctx, "g", tmpl, []*resourceapi.DeviceClass{class}); err != nil || d.Calls != calls {
				t.Fatalf("counted again before recountAfter (%d -> %d calls, err %v)", calls, d.Calls, err)
			}
			now = now.Add(time.Second)
			if _, err := d.Count(ctx, "g", tmpl, []*resourceapi.DeviceClass{class}); err != nil {
				t.Fatal(err)
			}
			if again := d.Calls > calls; again != tc.recounted {
				t.Errorf("counted again after recountAfter: %v, want %v", again, tc.recounted)
			}
		})
	}
}

// scaleRunner is a runner whose snapshot holds test/scale's device
// classes, which it returns.
func scaleRunner(ctx context.Context, tb testing.TB) (*framework.Runner, []*resourceapi.DeviceClass) {
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var classes []*resourceapi.DeviceClass
	for _, o := range scale.Classes() {
		c := o.(*resourceapi.DeviceClass)
		classes = append(classes, c)
		if err := r.Snapshot().SetDeviceClass(c); err != nil {
			tb.Fatal(err)
		}
	}
	return r, classes
}

// scaleTemplate is the template of a test/scale group of kind.
func scaleTemplate(group string, kind scale.Kind) *cloudprovider.NodeTemplate {
	node, slices := kwok.NodeObjects(scale.Group(group, "p", kind, 10), "template-"+group)
	// An instance's devices have uuids of their own; a template's have
	// none.
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			delete(d.Attributes, kwok.AttributeUUID)
		}
	}
	return &cloudprovider.NodeTemplate{Node: node, ResourceSlices: slices}
}
