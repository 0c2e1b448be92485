package clusterapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

// gpuNIC is a DRA template for a node with two GPUs and two NICs paired by
// PCIe root, the GPUs partitionable through shared counters and the NICs
// with consumable bandwidth.
const gpuNIC = `# GPUs: the counters first (a slice of their own), then the devices.
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
spec:
  driver: gpu.example.com
  sharedCounters:
  - name: gpu-0-counters
    counters:
      memory: {value: 80Gi}
  - name: gpu-1-counters
    counters:
      memory: {value: 80Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
spec:
  driver: gpu.example.com
  devices:
  - name: gpu-0
    attributes:
      resource.kubernetes.io/pcieRoot: {string: pci0}
      model: {string: h100}
    capacity:
      memory: {value: 80Gi}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters:
        memory: {value: 80Gi}
  - name: gpu-0-half
    attributes:
      resource.kubernetes.io/pcieRoot: {string: pci0}
    capacity:
      memory: {value: 40Gi}
    consumesCounters:
    - counterSet: gpu-0-counters
      counters:
        memory: {value: 40Gi}
  - name: gpu-1
    attributes:
      resource.kubernetes.io/pcieRoot: {string: pci1}
    capacity:
      memory: {value: 80Gi}
    consumesCounters:
    - counterSet: gpu-1-counters
      counters:
        memory: {value: 80Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
spec:
  driver: nic.example.com
  pool: {name: nics}
  devices:
  - name: nic-0
    allowMultipleAllocations: true
    attributes:
      resource.kubernetes.io/pcieRoot: {string: pci0}
    capacity:
      bandwidth:
        value: 100G
        requestPolicy:
          default: 10G
          validRange: {min: 1G}
  - name: nic-1
    attributes:
      resource.kubernetes.io/pcieRoot: {string: pci1}
`

func TestDRATemplate(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 3).ann(keyCPU, "32", keyMemory, "256Gi", AnnotationDRATemplate, "gpu-dra",
		keyDRADriver, "ignored.example.com", keyGPUCount, "8"),
		configMap("gpu-dra", map[string]string{DRATemplateKey: gpuNIC}))
	tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Name, Driver, Pool, NodeName string
		Count, Generation            int64
		Devices                      []string
		Counters                     int
	}
	var slices []got
	for _, s := range tmpl.ResourceSlices {
		g := got{Name: s.Name, Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, NodeName: *s.Spec.NodeName, Count: s.Spec.Pool.ResourceSliceCount,
			Generation: s.Spec.Pool.Generation, Counters: len(s.Spec.SharedCounters)}
		for _, d := range s.Spec.Devices {
			g.Devices = append(g.Devices, d.Name)
		}
		slices = append(slices, g)
	}
	// The ConfigMap replaces upstream's synthetic slice; every pool's
	// resourceSliceCount is the number of its slices.
	want := []got{
		{Name: "gpu-template-0", Driver: "gpu.example.com", Pool: "gpu-template", NodeName: "gpu-template", Count: 2, Generation: 1, Counters: 2},
		{Name: "gpu-template-1", Driver: "gpu.example.com", Pool: "gpu-template", NodeName: "gpu-template", Count: 2, Generation: 1, Devices: []string{"gpu-0", "gpu-0-half", "gpu-1"}},
		{Name: "gpu-template-2", Driver: "nic.example.com", Pool: "nics", NodeName: "gpu-template", Count: 1, Generation: 1, Devices: []string{"nic-0", "nic-1"}},
	}
	if diff := cmp.Diff(want, slices); diff != "" {
		t.Fatalf("slices (-want +got):\n%s", diff)
	}
	nic := tmpl.ResourceSlices[2].Spec.Devices[0]
	if bw := nic.Capacity["bandwidth"]; bw.Value.Cmp(resource.MustParse("100G")) != 0 || bw.RequestPolicy == nil || nic.AllowMultipleAllocations == nil {
		t.Fatalf("consumable capacity lost: %+v", nic)
	}
	if v := tmpl.ResourceSlices[1].Spec.Devices[2].Attributes["resource.kubernetes.io/pcieRoot"].StringValue; v == nil || *v != "pci1" {
		t.Fatalf("pcieRoot %v", v)
	}
}

func TestDRATemplateErrors(t *testing.T) {
	slice := func(spec string) string {
		return "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nspec:\n" + spec
	}
	for _, tc := range []struct {
		name string
		cm   *obj
		err  string
	}{
		{name: "missing ConfigMap", err: `annotation autoscaling.dra-autoscaler.io/dra-template: ConfigMap team/gpu-dra: configmaps "gpu-dra" not found`},
		{name: "missing key", cm: configMap("gpu-dra", map[string]string{"slices": gpuNIC}), err: `no data key "resourceslices.yaml"`},
		{name: "empty", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: "# nothing\n---\n"}), err: "holds no ResourceSlice"},
		{name: "not a ResourceSlice", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n"}),
			err: "document 0: not a ResourceSlice: error unmarshaling JSON: while decoding JSON: json: unknown field \"data\""},
		{name: "wrong kind", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: "apiVersion: v1\nkind: Pod\nspec: {}\n"}),
			err: `document 0: apiVersion "v1" kind "Pod": want resource.k8s.io/v1 ResourceSlice`},
		{name: "wrong version", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceSlice\nspec: {driver: a.b}\n"}),
			err: `apiVersion "resource.k8s.io/v1beta1" kind "ResourceSlice": want resource.k8s.io/v1 ResourceSlice`},
		{name: "unknown field", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  devices:\n  - name: d0\n    attribute: {}\n")}),
			err: `document 0: not a ResourceSlice: error unmarshaling JSON: while decoding JSON: json: unknown field "attribute"`},
		{name: "not YAML", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: "{{{"}), err: "document 0"},
		{name: "nodeName set", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  nodeName: n1\n")}),
			err: "spec.nodeName must not be set"},
		{name: "allNodes", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  allNodes: true\n")}),
			err: "spec.allNodes"},
		{name: "API validation names the field", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  devices:\n  - name: GPU_0\n")}),
			err: `document 0: spec.devices[0].name: Invalid value: "GPU_0"`},
		{name: "bad driver", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: Not A Driver\n")}), err: "spec.driver"},
		{name: "wrong resourceSliceCount", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  pool: {name: p, resourceSliceCount: 3}\n  devices: [{name: d0}]\n")}),
			err: "spec.pool.resourceSliceCount is 3, but the ConfigMap holds 1 slice(s) of driver a.example.com pool p"},
		{name: "counters and devices in one slice", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  sharedCounters: [{name: c, counters: {m: {value: '1'}}}]\n  devices: [{name: d0}]\n")}),
			err: "only one of `sharedCounters` or `devices` is allowed"},
		{name: "a counter set nobody declares", cm: configMap("gpu-dra", map[string]string{DRATemplateKey: slice("  driver: a.example.com\n  devices:\n  - name: d0\n    consumesCounters: [{counterSet: nope, counters: {m: {value: '1'}}}]\n")}),
			err: `spec.devices[0].consumesCounters[0]: counter set "nope" is declared by no slice of driver a.example.com pool gpu-template`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []*obj{md("gpu").size(0, 3).ann(keyCPU, "32", keyMemory, "256Gi", AnnotationDRATemplate, "gpu-dra")}
			if tc.cm != nil {
				objs = append(objs, tc.cm)
			}
			e := newEnv(t, nil, objs...)
			_, err := e.group(gpuGroup).TemplateNodeInfo()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v\nwant %q", err, tc.err)
			}
			if !strings.Contains(err.Error(), "node group MachineDeployment/team/gpu") {
				t.Fatalf("the error does not name the group: %v", err)
			}
		})
	}
}

// Garbage never panics.
func FuzzParseDRATemplate(f *testing.F) {
	f.Add(gpuNIC)
	f.Add("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nspec: {driver: a.b, devices: [{name: x}]}\n")
	f.Add("---\n---\n: :\n")
	f.Fuzz(func(t *testing.T, data string) {
		_, _ = parseDRATemplate("ns/cm", map[string]string{DRATemplateKey: data}, "n-template")
	})
}
