package kwok

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// The example config that `make demo` and the end-to-end tests use loads,
// validates and describes what its comments promise.
func TestExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("../../deploy/kwok/kwok-provider.yaml")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	e := newEnv(t, cfg)
	groups := e.p.NodeGroups()
	if len(groups) != 2 {
		t.Fatalf("%d node groups, want 2", len(groups))
	}
	tests := []struct {
		group            string
		min, max         int
		cpu, memory      string
		gpus, nics       int
		wantSliceDrivers []string
	}{
		{group: "cpu-4x", max: 10, cpu: "4", memory: "16Gi"},
		{group: "gpu-8x", max: 8, cpu: "64", memory: "512Gi", gpus: 8, nics: 8,
			wantSliceDrivers: []string{"gpu.example.com", "nic.example.com"}},
	}
	for i, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			g := groups[i]
			if g.Id() != tc.group || g.MinSize() != tc.min || g.MaxSize() != tc.max {
				t.Errorf("group %s min %d max %d, want %s %d %d", g.Id(), g.MinSize(), g.MaxSize(), tc.group, tc.min, tc.max)
			}
			tmpl, err := g.TemplateNodeInfo()
			if err != nil {
				t.Fatalf("TemplateNodeInfo: %v", err)
			}
			alloc := tmpl.Node.Status.Allocatable
			if alloc.Cpu().String() != tc.cpu || alloc.Memory().String() != tc.memory {
				t.Errorf("allocatable %v, want cpu %s memory %s", alloc, tc.cpu, tc.memory)
			}
			if len(tmpl.ResourceSlices) != len(tc.wantSliceDrivers) {
				t.Fatalf("%d slices, want %d", len(tmpl.ResourceSlices), len(tc.wantSliceDrivers))
			}
			roots := map[string][]string{}
			for j, s := range tmpl.ResourceSlices {
				if s.Spec.Driver != tc.wantSliceDrivers[j] {
					t.Errorf("slice %d driver %s, want %s", j, s.Spec.Driver, tc.wantSliceDrivers[j])
				}
				checkValidSlice(t, s)
				for _, d := range s.Spec.Devices {
					root := d.Attributes[resourceapi.QualifiedName("resource.kubernetes.io/pcieRoot")].StringValue
					if root == nil {
						t.Errorf("device %s has no pcieRoot", d.Name)
						continue
					}
					roots[*root] = append(roots[*root], d.Name)
				}
			}
			if tc.gpus == 0 {
				return
			}
			if len(roots) != tc.gpus {
				t.Errorf("%d PCIe roots, want %d", len(roots), tc.gpus)
			}
			for i := range tc.gpus {
				root := fmt.Sprintf("pci%d", i)
				want := []string{fmt.Sprintf("gpu-%d", i), fmt.Sprintf("nic-%d", i)}
				if got := roots[root]; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
					t.Errorf("%s holds %v, want %v", root, got, want)
				}
			}
			gpu := tmpl.ResourceSlices[0].Spec.Devices[0]
			if mem := gpu.Capacity["memory"].Value; mem.String() != "80Gi" {
				t.Errorf("GPU memory %s, want 80Gi", mem.String())
			}
		})
	}
}
