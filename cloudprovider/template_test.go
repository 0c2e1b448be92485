package cloudprovider

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Unit sizes from the template's annotation, and node counts rounded up
// to whole units.
func TestUnitSize(t *testing.T) {
	tests := []struct {
		name       string
		annotation *string
		wantSize   int
		wantErr    bool
		units      map[int]int // n -> Units(n)
	}{
		{name: "unset", wantSize: 1, units: map[int]int{0: 0, 1: 1, 5: 5}},
		{name: "four", annotation: ptr.To("4"), wantSize: 4, units: map[int]int{0: 0, 1: 4, 4: 4, 5: 8}},
		{name: "one", annotation: ptr.To("1"), wantSize: 1, units: map[int]int{3: 3}},
		{name: "zero", annotation: ptr.To("0"), wantSize: 1, wantErr: true, units: map[int]int{3: 3}},
		{name: "not a number", annotation: ptr.To("rack"), wantSize: 1, wantErr: true, units: map[int]int{3: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t", Annotations: map[string]string{}}}
			if tc.annotation != nil {
				node.Annotations[AnnotationUnitSize] = *tc.annotation
			}
			tmpl := &NodeTemplate{Node: node}
			got, err := tmpl.UnitSize()
			if got != tc.wantSize || (err != nil) != tc.wantErr {
				t.Errorf("UnitSize() = %d, %v; want %d, error %v", got, err, tc.wantSize, tc.wantErr)
			}
			for n, want := range tc.units {
				if got := tmpl.Units(n); got != want {
					t.Errorf("Units(%d) = %d, want %d", n, got, want)
				}
			}
		})
	}
}

// A template read off a running node keeps what the provider decides per
// launch: the unit size and the per-request labels, whose value on the
// node was its own request's.
func TestKeepLaunchChoices(t *testing.T) {
	fromNode := &NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Labels: map[string]string{"clique": "req-1", "zone": "a"}}}}
	declared := &NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t",
		Annotations: map[string]string{AnnotationTopologyPerRequest: "clique", AnnotationUnitSize: "4", "other": "x"}}}}
	fromNode.KeepLaunchChoices(declared)
	if _, has := fromNode.Node.Labels["clique"]; has || fromNode.Node.Labels["zone"] != "a" || !fromNode.TopologyPerRequest("clique") {
		t.Errorf("labels %v, annotations %v: want the request's clique dropped, chosen per request, the zone kept", fromNode.Node.Labels, fromNode.Node.Annotations)
	}
	if n, err := fromNode.UnitSize(); n != 4 || err != nil || fromNode.Node.Annotations["other"] != "" {
		t.Errorf("unit size %d (%v), annotations %v: want 4 and only the launch choices taken", n, err, fromNode.Node.Annotations)
	}
	plain := &NodeTemplate{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "t", Labels: map[string]string{"clique": "c"}}}}
	plain.KeepLaunchChoices(&NodeTemplate{Node: &corev1.Node{}})
	if plain.Node.Labels["clique"] != "c" {
		t.Errorf("labels %v: a provider choosing nothing per launch leaves the node's labels", plain.Node.Labels)
	}
}
