package drain

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// evictions makes the fake API server answer evictions: refused (429,
// as a PodDisruptionBudget does) the first refuse times, then accepted,
// which deletes the pod. It records the grace periods asked for.
type evictions struct {
	mu       sync.Mutex
	refuse   int
	attempts int
	grace    []int64
}

func (e *evictions) install(client *fake.Clientset) {
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		e.mu.Lock()
		e.attempts++
		refused := e.attempts <= e.refuse
		if ev.DeleteOptions != nil && ev.DeleteOptions.GracePeriodSeconds != nil {
			e.grace = append(e.grace, *ev.DeleteOptions.GracePeriodSeconds)
		}
		e.mu.Unlock()
		if refused {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		if err := client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name); err != nil {
			return true, nil, err
		}
		return true, nil, nil
	})
}

func TestDrain(t *testing.T) {
	tests := []struct {
		name      string
		refuse    int
		podGrace  *int64
		wantErr   string
		wantGrace int64
		evicted   int
	}{
		{name: "evicted at once", wantGrace: 600, evicted: 1},
		{name: "budget refuses twice, then allows", refuse: 2, wantGrace: 600, evicted: 1},
		{name: "the pod's shorter grace period is kept", podGrace: ptr.To(int64(5)), wantGrace: 5, evicted: 1},
		{name: "budget never allows: the drain fails", refuse: 1 << 20, wantErr: "not evicted within", wantGrace: 600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := builder.Pod("app", "web").Node("n1").Obj()
			pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1000))
			if tc.podGrace != nil {
				pod.Spec.TerminationGracePeriodSeconds = tc.podGrace
			}
			client := fake.NewClientset(pod)
			ev := &evictions{refuse: tc.refuse}
			ev.install(client)
			recorder := record.NewFakeRecorder(100)
			d := New(client, recorder, clock.RealClock{}, Options{MaxGracefulTermination: 600 * time.Second,
				MaxPodEvictionTime: 300 * time.Millisecond, RetryInterval: 20 * time.Millisecond, Headroom: time.Second})
			evicted := 0
			d.OnEvicted = func(*corev1.Pod) { evicted++ }
			err := d.Drain(context.Background(), "n1", []*corev1.Pod{pod})
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Drain: %v, want error %q", err, tc.wantErr)
			}
			if evicted != tc.evicted {
				t.Errorf("%d evictions reported, want %d", evicted, tc.evicted)
			}
			if tc.refuse > 0 && ev.attempts <= min(tc.refuse, 2) {
				t.Errorf("%d attempts, want retries after the refusals", ev.attempts)
			}
			if len(ev.grace) == 0 || ev.grace[0] != tc.wantGrace {
				t.Errorf("grace periods asked %v, want %d", ev.grace, tc.wantGrace)
			}
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
			}
			want := "Normal ScaleDown"
			if tc.wantErr != "" {
				want = "Warning ScaleDownFailed"
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], want) {
				t.Errorf("events %q, want one %q", events, want)
			}
		})
	}
}

// A pod that is gone, or replaced by a pod of the same name, needs no
// eviction and no wait.
func TestDrainPodAlreadyGone(t *testing.T) {
	replaced := builder.Pod("app", "web").Node("n2").UID("new").Obj()
	client := fake.NewClientset(replaced)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), "web")
		}
		return false, nil, nil
	})
	d := New(client, record.NewFakeRecorder(10), clock.RealClock{}, Options{MaxGracefulTermination: time.Minute, MaxPodEvictionTime: time.Second})
	old := builder.Pod("app", "web").Node("n1").UID("old").Obj()
	if err := d.Drain(context.Background(), "n1", []*corev1.Pod{old}); err != nil {
		t.Fatal(err)
	}
}

func TestTaintUntaint(t *testing.T) {
	ctx := context.Background()
	node := builder.Node("n1").Taint("gpu", "true", corev1.TaintEffectNoSchedule).Obj()
	client := fake.NewClientset(node)
	now := time.Unix(1700000000, 0)
	for range 2 { // idempotent
		if _, err := Taint(ctx, client, "n1", now); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(got.Spec.Taints) != 2 || got.Spec.Taints[1].Key != ToBeDeletedTaint || got.Spec.Taints[1].Value != "1700000000" {
		t.Fatalf("taints %+v, want the user's and one deletion taint", got.Spec.Taints)
	}
	if err := Untaint(ctx, client, "n1"); err != nil {
		t.Fatal(err)
	}
	got, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "gpu" {
		t.Fatalf("taints %+v after Untaint, want only the user's", got.Spec.Taints)
	}
	if err := Untaint(ctx, client, "gone"); err != nil {
		t.Fatalf("untainting a deleted node: %v", err)
	}
	if _, err := Taint(ctx, client, "gone", now); err == nil {
		t.Fatal("tainting a missing node succeeded")
	}
}
