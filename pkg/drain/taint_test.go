package drain

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestMarkAndUntaint(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tests := []struct {
		name          string
		cordoned      bool // by an admin, before
		cordon        bool
		wantMarked    bool // spec.unschedulable after Mark
		wantAfterUndo bool // spec.unschedulable after Untaint
	}{
		{name: "taint only", cordon: false, wantMarked: false, wantAfterUndo: false},
		{name: "cordon, then uncordon", cordon: true, wantMarked: true, wantAfterUndo: false},
		{name: "an admin's cordon stays", cordoned: true, cordon: true, wantMarked: true, wantAfterUndo: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nb := builder.Node("n1")
			if tc.cordoned {
				nb = nb.Unschedulable()
			}
			client := fake.NewClientset(nb.Obj())
			got, err := Mark(ctx, client, "n1", now, tc.cordon)
			if err != nil {
				t.Fatal(err)
			}
			if !hasTaint(got) || got.Spec.Unschedulable != tc.wantMarked {
				t.Errorf("after Mark: tainted %v, unschedulable %v; want tainted, unschedulable %v", hasTaint(got), got.Spec.Unschedulable, tc.wantMarked)
			}
			if err := Untaint(ctx, client, "n1"); err != nil {
				t.Fatal(err)
			}
			after, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if hasTaint(after) || after.Spec.Unschedulable != tc.wantAfterUndo || after.Annotations[CordonedAnnotation] != "" {
				t.Errorf("after Untaint: tainted %v, unschedulable %v, annotations %v; want untainted, unschedulable %v", hasTaint(after), after.Spec.Unschedulable, after.Annotations, tc.wantAfterUndo)
			}
		})
	}
}
