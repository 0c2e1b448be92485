package safety_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The marker writes the annotation once per node, at most MarksPerPass
// per pass (the loop's own writes share the client's QPS), and leaves
// nodes already marked alone.
func TestMarkerBoundsItsWritesPerPass(t *testing.T) {
	var nodes []*corev1.Node
	var objs []runtime.Object
	for i := range safety.MarksPerPass + 5 {
		n := builder.Node(fmt.Sprintf("n%02d", i)).Obj()
		nodes, objs = append(nodes, n), append(objs, n)
	}
	marked := builder.Node("marked").Annotation(safety.UsableAnnotation, t0.Format(time.RFC3339)).Obj()
	nodes, objs = append([]*corev1.Node{marked}, nodes...), append(objs, marked)
	client := fake.NewClientset(objs...)
	m := safety.NewMarker(client)
	count := func() int {
		list, err := client.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range list.Items {
			if _, ok := safety.UsableSince(&list.Items[i]); ok {
				n++
			}
		}
		return n
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for count() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d nodes marked, want %d", count(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	m.Mark(t.Context(), nodes, t0)
	waitFor(1 + safety.MarksPerPass)
	// The next pass marks the rest; nothing is written twice.
	m.Mark(t.Context(), nodes, t0.Add(time.Second))
	waitFor(len(nodes))
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != len(nodes)-1 {
		t.Errorf("%d patches, want one per unmarked node (%d)", patches, len(nodes)-1)
	}
}
