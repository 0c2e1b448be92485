package drainability

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Right before a removal the node's pods are listed afresh: what does not
// go with the node is work. A pod being deleted goes with a Ready node,
// but on a node that is not Ready nothing confirms it stopped.
func TestRemaining(t *testing.T) {
	deleting := func(p *corev1.Pod) *corev1.Pod {
		p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
		p.Finalizers = []string{"test/keep"}
		return p
	}
	pods := func(node string) []runtime.Object {
		return []runtime.Object{
			builder.Pod("app", node+"-web").OwnedBy("apps/v1", "ReplicaSet", "rs").Node(node).Obj(),
			deleting(builder.Pod("app", node+"-old").OwnedBy("apps/v1", "ReplicaSet", "rs").Node(node).Obj()),
			builder.Pod("kube-system", node+"-agent").OwnedBy("apps/v1", "DaemonSet", "agent").Node(node).Obj(),
		}
	}
	for _, tc := range []struct {
		name string
		node *corev1.Node // nil: the Node is gone
		want []string
	}{
		{name: "Ready", node: builder.Node("n").Obj(), want: []string{"app/n-web"}},
		{name: "NotReady", node: builder.Node("n").NotReady().Obj(), want: []string{"app/n-old", "app/n-web"}},
		{name: "Node gone", want: []string{"app/n-web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := pods("n")
			if tc.node != nil {
				objs = append(objs, tc.node)
			}
			got, err := Remaining(t.Context(), fake.NewClientset(objs...), "n")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("remaining (-want +got):\n%s", diff)
			}
		})
	}
}
