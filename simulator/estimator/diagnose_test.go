package estimator

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Pods of one claim shape cost one diagnosis per group; a new template
// object starts the group over.
func TestDiagnoserMemo(t *testing.T) {
	const root = "resource.kubernetes.io/pcieRoot"
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := r.Snapshot()
	for _, obj := range []error{
		snap.SetDeviceClass(builder.DeviceClass("gpu").Driver("gpu.example.com").Obj()),
		snap.SetDeviceClass(builder.DeviceClass("nic").Driver("nic.example.com").Obj()),
		snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "paired").
			Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(root).Obj()),
	} {
		if obj != nil {
			t.Fatal(obj)
		}
	}
	tmpl := func() *cloudprovider.NodeTemplate {
		n := template.PlaceholderNodeName
		return &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("8").Obj(), ResourceSlices: []*resourceapi.ResourceSlice{
			builder.ResourceSlice("g", n, "gpu.example.com", n).Devices(builder.Device("gpu-0").Attr(root, "pci0")).Obj(),
			builder.ResourceSlice("n", n, "nic.example.com", n).Devices(builder.Device("nic-0").Attr(root, "pci1")).Obj(),
		}}
	}
	t1 := tmpl()
	d := NewDiagnoser(r)
	for i := range 5 {
		pod := builder.Pod("ns", fmt.Sprintf("p-%d", i)).CPU("1").ClaimFromTemplate("accel", "paired").Obj()
		for _, g := range []string{"a", "b"} {
			b, err := d.Diagnose(ctx, pod, g, t1)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 1 || b[0].Constraint != "matchAttribute "+root || b[0].PodClaim != "accel" {
				t.Fatalf("pod %d group %s: blames %+v", i, g, b)
			}
		}
	}
	if d.Calls != 2 {
		t.Errorf("%d diagnoses for 5 pods of one shape on 2 groups, want 2", d.Calls)
	}
	pod := builder.Pod("ns", "q").CPU("1").ClaimFromTemplate("accel", "paired").Obj()
	if _, err := d.Diagnose(ctx, pod, "a", tmpl()); err != nil {
		t.Fatal(err)
	}
	if d.Calls != 3 {
		t.Errorf("a new template was not diagnosed again (%d calls)", d.Calls)
	}
	if nodes, _ := snap.NodeInfos().List(); len(nodes) != 0 {
		t.Errorf("snapshot keeps %d diagnosis nodes", len(nodes))
	}
}

// BenchmarkDiagnose compares a diagnosis run through the framework (a new
// template object each time, so the memo misses) with a memo hit.
func BenchmarkDiagnose(b *testing.B) {
	const root = "resource.kubernetes.io/pcieRoot"
	_, ctx := ktesting.NewTestContext(b)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	snap := r.Snapshot()
	_ = snap.SetDeviceClass(builder.DeviceClass("gpu").Driver("gpu.example.com").Obj())
	_ = snap.SetDeviceClass(builder.DeviceClass("nic").Driver("nic.example.com").Obj())
	_ = snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "paired").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(root).Obj())
	n := template.PlaceholderNodeName
	gpus := builder.ResourceSlice("g", n, "gpu.example.com", n)
	nics := builder.ResourceSlice("n", n, "nic.example.com", n)
	for i := range 8 {
		gpus.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(root, fmt.Sprintf("pci%d", i)))
		nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(root, fmt.Sprintf("pci%d", i+8)))
	}
	slices := []*resourceapi.ResourceSlice{gpus.Obj(), nics.Obj()}
	pod := builder.Pod("ns", "p").CPU("1").ClaimFromTemplate("accel", "paired").Obj()
	b.Run("framework", func(b *testing.B) {
		d := NewDiagnoser(r)
		for b.Loop() {
			tmpl := &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("64").Obj(), ResourceSlices: slices}
			if _, err := d.Diagnose(ctx, pod, "g", tmpl); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memo", func(b *testing.B) {
		d := NewDiagnoser(r)
		tmpl := &cloudprovider.NodeTemplate{Node: builder.Node(n).CPU("64").Obj(), ResourceSlices: slices}
		for b.Loop() {
			if _, err := d.Diagnose(ctx, pod, "g", tmpl); err != nil {
				b.Fatal(err)
			}
		}
	})
}
