package actuator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

type env struct {
	client *fake.Clientset
	group  *fakeprovider.FakeNodeGroup
	a      *Remover
	nodes  map[string]*corev1.Node
}

func newEnv(t *testing.T, nodeNames []string, pods ...*corev1.Pod) *env {
	t.Helper()
	return newEnvWith(t, Options{}, nodeNames, pods...)
}

func newEnvWith(t *testing.T, opts Options, nodeNames []string, pods ...*corev1.Pod) *env {
	t.Helper()
	g := fakeprovider.NewGroup("g", 0, 10)
	e := &env{group: g, nodes: map[string]*corev1.Node{}}
	var objs []runtime.Object
	for _, name := range nodeNames {
		n := builder.Node(name).Obj()
		n.Spec.ProviderID = g.AddInstance(cloudprovider.InstanceRunning, nil)
		e.nodes[name] = n
		objs = append(objs, n)
	}
	g.SetTarget(len(nodeNames))
	for _, p := range pods {
		objs = append(objs, p)
	}
	e.client = fake.NewClientset(objs...)
	// Evictions succeed and delete the pod, as the API server does.
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, e.client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
	rec := record.NewFakeRecorder(100)
	d := drain.New(e.client, rec, clock.RealClock{}, drain.Options{MaxGracefulTermination: time.Minute, MaxPodEvictionTime: time.Second, RetryInterval: 10 * time.Millisecond})
	e.a = New(e.client, d, rec, clock.RealClock{}, opts)
	return e
}

func (e *env) deletion(name string, evict ...*corev1.Pod) Deletion {
	return Deletion{Node: e.nodes[name], Group: e.group, Evict: evict}
}

func (e *env) tainted(t *testing.T, name string) bool {
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == drain.ToBeDeletedTaint {
			return true
		}
	}
	return false
}

func describe(outcomes []RemovalOutcome) string {
	var parts []string
	for _, o := range outcomes {
		s := o.Node + ":ok"
		if o.Err != nil {
			s = o.Node + ":" + o.Stage
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func TestEmptyNodesInBulk(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newEnv(t, []string{"n1", "n2", "n3"})
	failed := e.a.Start(ctx, []Deletion{e.deletion("n1"), e.deletion("n2")}, nil)
	if len(failed) != 0 {
		t.Fatalf("failed at once: %v", failed)
	}
	e.a.Wait()
	if got := describe(e.a.Collect()); got != "n1:ok n2:ok" {
		t.Fatalf("outcomes %s", got)
	}
	calls := e.group.Calls()
	if len(calls) != 1 || calls[0].Method != "DeleteNodes" || len(calls[0].Nodes) != 2 {
		t.Fatalf("calls %+v, want one DeleteNodes of both nodes", calls)
	}
	if del, _ := e.a.Deleting(); len(del) != 0 {
		t.Errorf("still deleting %v", del)
	}
	if e.tainted(t, "n3") {
		t.Error("n3 tainted though not removed")
	}
}

func TestFailuresUntaint(t *testing.T) {
	late := builder.Pod("app", "late").OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	tests := []struct {
		name      string
		pods      []*corev1.Pod
		deleteErr error
		want      string
	}{
		{name: "a pod bound after the plan", pods: []*corev1.Pod{late}, want: "n1:drain"},
		{name: "the provider refuses", deleteErr: errors.New("quota"), want: "n1:delete"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newEnv(t, []string{"n1"}, tc.pods...)
			if tc.deleteErr != nil {
				e.group.Fail("DeleteNodes", tc.deleteErr)
			}
			e.a.Start(ctx, []Deletion{e.deletion("n1")}, nil)
			e.a.Wait()
			if got := describe(e.a.Collect()); got != tc.want {
				t.Fatalf("outcomes %s, want %s", got, tc.want)
			}
			if e.tainted(t, "n1") {
				t.Error("n1 still tainted after the failure")
			}
		})
	}
}

func TestDrainThenDelete(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pod := builder.Pod("app", "web").OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	e := newEnv(t, []string{"n1", "n2"}, pod)
	e.a.Start(ctx, nil, []Deletion{e.deletion("n1", pod)})
	if _, drains := e.a.Deleting(); drains > 1 {
		t.Fatalf("%d drains for one node", drains)
	}
	e.a.Wait()
	if got := describe(e.a.Collect()); got != "n1:ok" {
		t.Fatalf("outcomes %s", got)
	}
	if _, err := e.client.CoreV1().Pods("app").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("pod not evicted")
	}
	calls := e.group.Calls()
	if len(calls) != 1 || fmt.Sprint(calls[0].Nodes) != fmt.Sprint([]string{e.nodes["n1"].Spec.ProviderID}) {
		t.Fatalf("calls %+v, want n1 deleted", calls)
	}
}

// A pod bound to a drained node after the plan is not left to die with
// the node: the removal fails and the node is untainted.
func TestDrainFindsLatePod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	planned := builder.Pod("app", "web").OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	late := builder.Pod("app", "late").OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	e := newEnv(t, []string{"n1"}, planned, late)
	e.a.Start(ctx, nil, []Deletion{e.deletion("n1", planned)})
	e.a.Wait()
	if got := describe(e.a.Collect()); got != "n1:drain" {
		t.Fatalf("outcomes %s, want a drain failure", got)
	}
	if len(e.group.Calls()) != 0 || e.tainted(t, "n1") {
		t.Fatalf("calls %+v, tainted %v: want no deletion and the taint gone", e.group.Calls(), e.tainted(t, "n1"))
	}
}

func TestRemovalOptions(t *testing.T) {
	ds := builder.DaemonSet("kube-system", "agent").Obj()
	web := builder.Pod("app", "web").OwnedBy("apps/v1", "ReplicaSet", "rs").Node("n1").Obj()
	tests := []struct {
		name      string
		opts      Options
		drained   bool // else empty (but for the DaemonSet pod)
		deleteErr error
		// wantCordoned is spec.unschedulable at the end; wantAgent whether
		// the DaemonSet pod is still there.
		wantCordoned, wantAgent bool
	}{
		{name: "defaults of the type: neither", wantCordoned: false, wantAgent: true},
		{name: "cordon", opts: Options{Cordon: true}, wantCordoned: true, wantAgent: true},
		{name: "failed removal uncordons", opts: Options{Cordon: true}, deleteErr: errors.New("quota"), wantCordoned: false, wantAgent: true},
		{name: "DaemonSet pods of empty nodes evicted", opts: Options{EvictDaemonSetsOfEmpty: true}, wantAgent: false},
		{name: "only empty nodes' DaemonSet pods", opts: Options{EvictDaemonSetsOfEmpty: true}, drained: true, wantAgent: true},
		{name: "DaemonSet pods of drained nodes evicted", opts: Options{EvictDaemonSetsOfDrained: true}, drained: true, wantAgent: false},
		{name: "only drained nodes' DaemonSet pods", opts: Options{EvictDaemonSetsOfDrained: true}, wantAgent: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			agent := builder.PodFromDaemonSet(ds, "agent-n1", "n1")
			pods := []*corev1.Pod{agent}
			if tc.drained {
				pods = append(pods, web)
			}
			e := newEnvWith(t, tc.opts, []string{"n1"}, pods...)
			if tc.deleteErr != nil {
				e.group.Fail("DeleteNodes", tc.deleteErr)
			}
			if tc.drained {
				e.a.Start(ctx, nil, []Deletion{e.deletion("n1", web)})
			} else {
				e.a.Start(ctx, []Deletion{e.deletion("n1")}, nil)
			}
			e.a.Wait()
			want := "n1:ok"
			if tc.deleteErr != nil {
				want = "n1:delete"
			}
			if got := describe(e.a.Collect()); got != want {
				t.Fatalf("outcomes %s, want %s", got, want)
			}
			n, err := e.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable != tc.wantCordoned {
				t.Errorf("unschedulable %v, want %v", n.Spec.Unschedulable, tc.wantCordoned)
			}
			_, err = e.client.CoreV1().Pods("kube-system").Get(ctx, "agent-n1", metav1.GetOptions{})
			if (err == nil) != tc.wantAgent {
				t.Errorf("DaemonSet pod there: %v, want %v", err == nil, tc.wantAgent)
			}
		})
	}
}
