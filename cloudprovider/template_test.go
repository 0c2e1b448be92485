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
