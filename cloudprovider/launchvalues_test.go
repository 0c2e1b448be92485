package cloudprovider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// channelSlice is a slice of IMEX-channel-like devices, each with a clique
// attribute of value clique and an index.
func channelSlice(clique string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "channels"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "compute-domain.example.com"}}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "channel-" + string(rune('0'+i)),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"clique": {StringValue: ptr.To(clique)},
				"id":     {IntValue: ptr.To(int64(i))},
				"kind":   {StringValue: ptr.To("channel")},
			}})
	}
	return s
}

func cliqueOf(s *resourceapi.ResourceSlice, i int) string {
	return *s.Spec.Devices[i].Attributes["clique"].StringValue
}

func TestFillLaunchValues(t *testing.T) {
	marked := channelSlice(LaunchValue("nvidia.com/gpu.clique"), 2)
	fixed := channelSlice("rack-7", 1)
	value := func(label string) string { return "value of " + label }
	tests := []struct {
		name   string
		in     []*resourceapi.ResourceSlice
		want   []string // each slice's first device's clique after filling
		copied []bool   // whether each slice is a copy
	}{
		{"nothing to fill", []*resourceapi.ResourceSlice{fixed}, []string{"rack-7"}, []bool{false}},
		{"filled", []*resourceapi.ResourceSlice{marked}, []string{"value of nvidia.com/gpu.clique"}, []bool{true}},
		{"mixed", []*resourceapi.ResourceSlice{fixed, marked}, []string{"rack-7", "value of nvidia.com/gpu.clique"}, []bool{false, true}},
		{"none", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := FillLaunchValues(tc.in, value)
			if len(out) != len(tc.in) {
				t.Fatalf("%d slices, want %d", len(out), len(tc.in))
			}
			for i, s := range out {
				if got := cliqueOf(s, 0); got != tc.want[i] {
					t.Errorf("slice %d: clique %q, want %q", i, got, tc.want[i])
				}
				if (s != tc.in[i]) != tc.copied[i] {
					t.Errorf("slice %d copied: %v, want %v", i, s != tc.in[i], tc.copied[i])
				}
				if *s.Spec.Devices[0].Attributes["kind"].StringValue != "channel" || *s.Spec.Devices[0].Attributes["id"].IntValue != 0 {
					t.Errorf("slice %d: other attributes changed: %v", i, s.Spec.Devices[0].Attributes)
				}
			}
		})
	}
	if got := cliqueOf(marked, 1); got != LaunchValue("nvidia.com/gpu.clique") {
		t.Errorf("the template's slice was changed: %q", got)
	}
	if got := LaunchLabels([]*resourceapi.ResourceSlice{fixed, marked, marked}); len(got) != 1 || got[0] != "nvidia.com/gpu.clique" {
		t.Errorf("LaunchLabels %v, want the clique label once", got)
	}
}

// A template read off a node of clique "req-1" says its channels are in
// the clique of whichever unit launches, not in req-1.
func TestKeepLaunchChoicesMarksAttributes(t *testing.T) {
	other := channelSlice("req-2", 1)
	fromNode := &NodeTemplate{
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t",
			Labels: map[string]string{"nvidia.com/gpu.clique": "req-1"}}},
		ResourceSlices: []*resourceapi.ResourceSlice{channelSlice("req-1", 2), other},
	}
	declared := &NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Annotations: map[string]string{AnnotationTopologyPerRequest: "nvidia.com/gpu.clique"}}}}
	fromNode.KeepLaunchChoices(declared)
	want := LaunchValue("nvidia.com/gpu.clique")
	if got := cliqueOf(fromNode.ResourceSlices[0], 1); got != want {
		t.Errorf("clique attribute %q, want %q", got, want)
	}
	if got := cliqueOf(fromNode.ResourceSlices[1], 0); got != "req-2" {
		t.Errorf("an attribute with another value became %q", got)
	}
}
