package balance

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// tmpl is a template of node name with labels and gpus GPUs (one slice
// whose pool is the node, as drivers publish them).
func tmpl(name string, labels map[string]string, cpu, memory string, gpus ...*builder.DeviceBuilder) *cloudprovider.NodeTemplate {
	t := &cloudprovider.NodeTemplate{Node: builder.Node(name).CPU(cpu).Memory(memory).Labels(labels).Obj()}
	if len(gpus) > 0 {
		t.ResourceSlices = []*resourceapi.ResourceSlice{builder.ResourceSlice(name+"-gpu", name, "gpu.example.com", name).Devices(gpus...).Obj()}
	}
	return t
}

func gpu(name, model string) *builder.DeviceBuilder {
	return builder.Device(name).Attr("model", model).Capacity("memory", "80Gi")
}

func TestSimilar(t *testing.T) {
	zoneA := map[string]string{corev1.LabelTopologyZone: "a", corev1.LabelHostname: "n-a", "pool": "gpu"}
	zoneB := map[string]string{corev1.LabelTopologyZone: "b", corev1.LabelHostname: "n-b", "pool": "gpu"}
	withLabel := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for x, y := range m {
			if x != k {
				out[x] = y
			}
		}
		return out
	}
	base := tmpl("a", zoneA, "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100"))
	tests := []struct {
		name           string
		labels, ignore []string
		other          *cloudprovider.NodeTemplate
		want           bool
	}{
		{name: "zone and hostname differ", other: tmpl("b", zoneB, "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: true},
		{name: "device names and pool differ", other: tmpl("b", zoneB, "32", "256Gi", gpu("x", "h100"), gpu("y", "h100")), want: true},
		{name: "memory within 1.5%", other: tmpl("b", zoneB, "32", "254Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: true},
		{name: "memory beyond 1.5%", other: tmpl("b", zoneB, "32", "240Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: false},
		{name: "CPU differs", other: tmpl("b", zoneB, "16", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: false},
		{name: "fewer GPUs", other: tmpl("b", zoneB, "32", "256Gi", gpu("gpu-0", "h100")), want: false},
		{name: "other GPU model", other: tmpl("b", zoneB, "32", "256Gi", gpu("gpu-0", "a100"), gpu("gpu-1", "a100")), want: false},
		{name: "no DRA devices", other: tmpl("b", zoneB, "32", "256Gi"), want: false},
		{name: "custom label differs", other: tmpl("b", withLabel(zoneB, "pool", "other"), "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: false},
		{name: "custom label only on one", other: tmpl("b", withLabel(zoneB, "team", "x"), "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: false},
		{name: "custom label ignored", ignore: []string{"team"},
			other: tmpl("b", withLabel(zoneB, "team", "x"), "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: true},
		{name: "balancing label: zone compared", labels: []string{corev1.LabelTopologyZone},
			other: tmpl("b", zoneB, "32", "256Gi", gpu("gpu-0", "h100"), gpu("gpu-1", "h100")), want: false},
		{name: "balancing label: nothing else compared", labels: []string{"pool"},
			other: tmpl("b", zoneB, "8", "16Gi"), want: true},
		{name: "balancing label missing on one", labels: []string{"pool"},
			other: tmpl("b", map[string]string{}, "32", "256Gi"), want: false},
		{name: "no template", other: nil, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.labels, tc.ignore)
			if got := s.Similar(base, tc.other); got != tc.want {
				t.Errorf("Similar = %v, want %v", got, tc.want)
			}
			if got := s.Similar(tc.other, base); got != tc.want {
				t.Errorf("Similar reversed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name   string
		groups []Group
		delta  int
		want   []int
	}{
		{"even", []Group{{"a", 0, 10}, {"b", 0, 10}}, 4, []int{2, 2}},
		{"odd: the chosen group first", []Group{{"a", 0, 10}, {"b", 0, 10}}, 3, []int{2, 1}},
		{"smallest filled first", []Group{{"a", 3, 10}, {"b", 0, 10}, {"c", 1, 10}}, 4, []int{0, 3, 1}},
		{"to even targets, then round", []Group{{"a", 3, 10}, {"b", 0, 10}}, 7, []int{2, 5}},
		{"max respected", []Group{{"a", 0, 1}, {"b", 0, 10}}, 4, []int{1, 3}},
		{"all full", []Group{{"a", 2, 2}, {"b", 3, 3}}, 2, []int{0, 0}},
		{"room runs out", []Group{{"a", 0, 1}, {"b", 0, 2}}, 5, []int{1, 2}},
		{"nothing to add", []Group{{"a", 0, 5}}, 0, []int{0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Split(tc.groups, tc.delta)); diff != "" {
				t.Errorf("Split (-want +got):\n%s", diff)
			}
		})
	}
}
