package framework

import (
	"fmt"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// A hypothetical node's CSINode lasts until the snapshot's next Reset:
// the pass after it sets those of the nodes it adds again, so what
// passes set does not pile up however node names come and go, and a
// name of an earlier pass does not read that pass's CSINode.
func TestTemplateCSINodesLastAPass(t *testing.T) {
	tmpl := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "template"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: "csi.example.com", NodeID: "template", Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](4)}}}}}
	for _, tc := range []struct {
		name  string
		nodes func(pass int) []string // the nodes a pass sets
	}{
		{"new names every pass", func(pass int) []string {
			return []string{fmt.Sprintf("booting-%d", pass), fmt.Sprintf("group-%d-upcoming-0", pass)}
		}},
		{"the same names every pass", func(int) []string { return []string{"g-upcoming-0", "g-upcoming-1"} }},
		{"names of every other pass", func(pass int) []string { return []string{fmt.Sprintf("g-template-%d", pass%2)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRunner(t, "")
			var last []string
			for pass := range 200 {
				if err := r.Snapshot().Reset(); err != nil {
					t.Fatal(err)
				}
				nodes := tc.nodes(pass)
				for _, n := range last {
					if _, err := r.csi.Get(n); !apierrors.IsNotFound(err) {
						t.Fatalf("pass %d: node %s of the pass before has a CSINode (err %v)", pass, n, err)
					}
				}
				for _, n := range nodes {
					r.SetTemplateCSINode(n, tmpl)
				}
				for _, n := range nodes {
					got, err := r.csi.Get(n)
					if err != nil || got.Name != n || len(got.Spec.Drivers) != 1 {
						t.Fatalf("pass %d: node %s: CSINode %v, err %v; want its template's", pass, n, got, err)
					}
				}
				if list, err := r.csi.List(labels.Everything()); err != nil || len(list) != len(nodes) {
					t.Fatalf("pass %d: %d CSINodes listed (err %v), want %d", pass, len(list), err, len(nodes))
				}
				if len(r.csi.templated) > len(nodes) {
					t.Fatalf("pass %d: %d templated CSINodes kept, want at most this pass's %d", pass, len(r.csi.templated), len(nodes))
				}
				last = nodes
			}
			// nil takes a node's CSINode back within the pass.
			r.SetTemplateCSINode(last[0], nil)
			if _, err := r.csi.Get(last[0]); !apierrors.IsNotFound(err) {
				t.Fatalf("node %s has a CSINode after it was set to none (err %v)", last[0], err)
			}
		})
	}
}
