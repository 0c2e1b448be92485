package autoscaler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func cpuGroup(id, cpu string) *fakeprovider.FakeNodeGroup {
	return fakeprovider.NewGroup(id, 0, 5).WithTemplate(&cloudprovider.NodeTemplate{
		Node: builder.Node(template.PlaceholderNodeName).CPU(cpu).Memory("32Gi").Label("group", id).Obj(),
	}, nil)
}

// fixture is the autoscaler as the binary wires it (autoscaler.New), over
// a fake clientset holding the test's objects, the fake provider and a
// fake clock, started.
type fixture struct {
	*autoscaler.Autoscaler
	client *fake.Clientset
}

// newLoop is newLoopWith without changes to the options or the world.
func newLoop(t *testing.T, ctx context.Context, clock *testclock.FakeClock, recorder record.EventRecorder, provider *fakeprovider.Provider, objs ...runtime.Object) *fixture {
	t.Helper()
	return newLoopWith(t, ctx, nil, clock, recorder, provider, objs...)
}

// newLoopWith wires the autoscaler over objs (pods, nodes, DRA objects),
// after setup (if set) changed the default options or the world.
func newLoopWith(t *testing.T, ctx context.Context, setup func(*config.Options, *autoscaler.Env), clock *testclock.FakeClock,
	recorder record.EventRecorder, provider *fakeprovider.Provider, objs ...runtime.Object) *fixture {
	t.Helper()
	opts := config.Default()
	client := fake.NewClientset()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Node:
			_, err = client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceSlice:
			_, err = client.ResourceV1().ResourceSlices().Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.ResourceClaim:
			_, err = client.ResourceV1().ResourceClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *resourceapi.DeviceClass:
			_, err = client.ResourceV1().DeviceClasses().Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("newLoop: unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	groups, sizes, err := nodegroups.Restrict(provider.NodeGroups(), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := autoscaler.Env{Client: client, Provider: provider, Recorder: recorder, Groups: groups, Sizes: sizes}
	if clock != nil { // nil: the real clock (virtual in a synctest bubble)
		env.Clock = clock
	}
	if setup != nil {
		setup(opts, &env)
	}
	a, err := autoscaler.New(ctx, opts, env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(a.Shutdown) // after cancel: cleanups run last-in first-out
	t.Cleanup(cancel)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return &fixture{Autoscaler: a, client: client}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestRunOnceScalesUpOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	small, big := cpuGroup("small", "4"), cpuGroup("big", "16")
	provider := fakeprovider.New(small, big)
	pod := builder.Pod("ns", "trainer").CPU("8").Obj()
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	clock := testclock.NewFakeClock(t0)
	recorder := record.NewFakeRecorder(10)
	l := newLoop(t, ctx, clock, recorder, provider, pod)

	// First pass: only the big group's nodes can take the pod.
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if len(pass.Get(st, act.Results)) != 1 || pass.Get(st, act.Results)[0].Group.Id != "big" || pass.Get(st, act.Results)[0].Added != 1 || pass.Get(st, act.Results)[0].Err != nil {
		t.Fatalf("results = %+v, want big grown by 1", pass.Get(st, act.Results))
	}
	if diff := cmp.Diff([]fakeprovider.Call{{Method: "IncreaseSize", Delta: 1}}, big.Calls()); diff != "" {
		t.Errorf("big group calls (-want +got):\n%s", diff)
	}
	if calls := small.Calls(); len(calls) != 0 {
		t.Errorf("small group calls: %+v", calls)
	}
	if diff := cmp.Diff([]string{"Normal TriggeredScaleUp pod triggered scale-up: [{big 0->1 (max: 5)}]"}, drain(recorder)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Next pass, the node still booting: the pod waits for it.
	clock.Step(10 * time.Second)
	st, err = l.RunOnce(ctx)
	if err != nil {
		t.Fatalf("second RunOnce: %v", err)
	}
	if len(pass.Get(st, fitexisting.Fits)) != 1 || len(pass.Get(st, fitexisting.Pending)) != 0 || len(pass.Get(st, act.Results)) != 0 {
		t.Errorf("second pass: fits now %d, pending %d, results %+v; want the pod on the upcoming node", len(pass.Get(st, fitexisting.Fits)), len(pass.Get(st, fitexisting.Pending)), pass.Get(st, act.Results))
	}
	if got := len(big.Calls()) + len(small.Calls()); got != 1 {
		t.Errorf("%d provider calls in all, want only the first IncreaseSize: big %+v small %+v", got, big.Calls(), small.Calls())
	}
	if r := l.Tracker.InFlight(); len(r) != 1 || r[0].Group != "big" || r[0].Delta != 1 || !r[0].Time.Equal(t0) {
		t.Errorf("in flight = %+v, want the first request", r)
	}
	if ev := drain(recorder); len(ev) != 0 {
		t.Errorf("events in the second pass: %v", ev)
	}
}
