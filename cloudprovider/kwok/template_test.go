package kwok

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	resourceinternal "k8s.io/kubernetes/pkg/apis/resource"
	resourcevalidation "k8s.io/kubernetes/pkg/apis/resource/validation"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// sliceShape is what a test expects of one template slice.
type sliceShape struct {
	name     string
	counters int
	devices  int
}

func TestTemplateNodeInfo(t *testing.T) {
	many := cpuGroup("many", 0, 1)
	many.Template.Drivers = []DriverConfig{{Driver: "nic.example.com"}}
	for i := range 100 {
		many.Template.Drivers[0].Devices = append(many.Template.Drivers[0].Devices, builder.Device(fmt.Sprintf("vf-%d", i)).Obj())
	}
	racked := cpuGroup("racked", 0, 1)
	racked.Topology = map[string]string{"topology.example.com/rack": "rack-a"}

	tests := []struct {
		name       string
		group      NodeGroupConfig
		wantSlices []sliceShape
		wantLabels map[string]string
		check      func(t *testing.T, slices []*resourceapi.ResourceSlice)
	}{
		{
			name:  "8 GPUs and 8 NICs paired by PCIe root",
			group: gpuGroup("gpu-8x", 0, 1),
			wantSlices: []sliceShape{
				{name: "gpu-8x-template-gpu-example-com-0", devices: 8},
				{name: "gpu-8x-template-nic-example-com-0", devices: 8},
			},
			check: func(t *testing.T, slices []*resourceapi.ResourceSlice) {
				for i := range 8 {
					gpu, nic := slices[0].Spec.Devices[i], slices[1].Spec.Devices[i]
					root := resourceapi.QualifiedName("resource.kubernetes.io/pcieRoot")
					if *gpu.Attributes[root].StringValue != fmt.Sprintf("pci%d", i) || *nic.Attributes[root].StringValue != *gpu.Attributes[root].StringValue {
						t.Errorf("%s and %s are not paired on pci%d", gpu.Name, nic.Name, i)
					}
					if mem := gpu.Capacity["memory"].Value; mem.String() != "80Gi" {
						t.Errorf("%s memory %s, want 80Gi", gpu.Name, mem.String())
					}
				}
			},
		},
		{
			name:  "partitionable GPU with 7 slices through shared counters",
			group: partitionableGroup("mig"),
			wantSlices: []sliceShape{
				{name: "mig-template-gpu-example-com-0", counters: 1},
				{name: "mig-template-gpu-example-com-1", devices: 8},
			},
			check: func(t *testing.T, slices []*resourceapi.ResourceSlice) {
				set := slices[0].Spec.SharedCounters[0]
				if n := set.Counters["slices"].Value; set.Name != "gpu-0" || n.Value() != 7 {
					t.Errorf("counter set = %+v, want gpu-0 with 7 slices", set)
				}
				for _, d := range slices[1].Spec.Devices {
					if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != "gpu-0" {
						t.Errorf("device %s consumes %+v, want counters of gpu-0", d.Name, d.ConsumesCounters)
					}
				}
			},
		},
		{
			name:  "100 devices split over slices the API accepts",
			group: many,
			wantSlices: []sliceShape{
				{name: "many-template-nic-example-com-0", devices: 64},
				{name: "many-template-nic-example-com-1", devices: 36},
			},
		},
		{
			name:       "no drivers, topology labels",
			group:      racked,
			wantLabels: map[string]string{"topology.example.com/rack": "rack-a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{tc.group}})
			tmpl, err := e.group(t, tc.group.Name).TemplateNodeInfo()
			if err != nil {
				t.Fatalf("TemplateNodeInfo: %v", err)
			}
			node, name := tmpl.Node, tc.group.Name+"-template"
			if node.Name != name || node.Spec.ProviderID != "" || node.Labels[LabelNodeGroup] != tc.group.Name || node.Labels[corev1.LabelHostname] != name {
				t.Errorf("template node %s providerID %q labels %v", node.Name, node.Spec.ProviderID, node.Labels)
			}
			for k, v := range tc.wantLabels {
				if node.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
				}
			}
			if len(node.Status.Conditions) != 1 || node.Status.Conditions[0].Type != corev1.NodeReady || node.Status.Conditions[0].Status != corev1.ConditionTrue {
				t.Errorf("template conditions %v, want Ready", node.Status.Conditions)
			}
			if cpu := node.Status.Allocatable.Cpu(); cpu.String() != "4" {
				t.Errorf("allocatable cpu %s, want 4", cpu.String())
			}
			if len(tmpl.Pods) != 0 {
				t.Errorf("template has %d pods, want none", len(tmpl.Pods))
			}
			if len(tmpl.ResourceSlices) != len(tc.wantSlices) {
				t.Fatalf("%d slices, want %d", len(tmpl.ResourceSlices), len(tc.wantSlices))
			}
			for i, s := range tmpl.ResourceSlices {
				want := tc.wantSlices[i]
				if s.Name != want.name || len(s.Spec.SharedCounters) != want.counters || len(s.Spec.Devices) != want.devices {
					t.Errorf("slice %d = %s with %d counter sets, %d devices; want %+v", i, s.Name, len(s.Spec.SharedCounters), len(s.Spec.Devices), want)
				}
				if *s.Spec.NodeName != name || s.Spec.Pool.Name != name || s.Spec.Pool.Generation != 1 {
					t.Errorf("slice %s nodeName %s pool %+v, want both %s", s.Name, *s.Spec.NodeName, s.Spec.Pool, name)
				}
				count := 0
				for _, other := range tmpl.ResourceSlices {
					if other.Spec.Driver == s.Spec.Driver {
						count++
					}
				}
				if s.Spec.Pool.ResourceSliceCount != int64(count) {
					t.Errorf("slice %s resourceSliceCount %d, want %d", s.Name, s.Spec.Pool.ResourceSliceCount, count)
				}
				checkValidSlice(t, s)
			}
			if tc.check != nil {
				tc.check(t, tmpl.ResourceSlices)
			}

			// The template is the caller's to change.
			tmpl.Node.Labels["x"] = "y"
			again, _ := e.group(t, tc.group.Name).TemplateNodeInfo()
			if _, ok := again.Node.Labels["x"]; ok {
				t.Error("changing a returned template changed the next one")
			}
		})
	}
}

// checkValidSlice runs the API server's validation on a slice.
func checkValidSlice(t *testing.T, s *resourceapi.ResourceSlice) {
	t.Helper()
	var internal resourceinternal.ResourceSlice
	if err := legacyscheme.Scheme.Convert(s, &internal, nil); err != nil {
		t.Fatalf("converting slice %s: %v", s.Name, err)
	}
	if errs := resourcevalidation.ValidateResourceSlice(&internal); len(errs) > 0 {
		t.Errorf("slice %s is invalid: %v", s.Name, errs.ToAggregate())
	}
}
