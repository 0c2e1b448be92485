package autoscaler_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func unschedulablePod(name, cpu string) *corev1.Pod {
	pod := builder.Pod("ns", name).CPU(cpu).Obj()
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-time.Minute))
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/0 nodes are available"}}
	return pod
}

// Explain runs the pass's simulation for one pod and acts on nothing.
func TestExplain(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	small, big := cpuGroup("small", "4"), cpuGroup("big", "16")
	full := fakeprovider.NewGroup("full", 0, 0).WithTemplate(&cloudprovider.NodeTemplate{
		Node: builder.Node(template.PlaceholderNodeName).CPU("16").Memory("32Gi").Obj()}, nil)
	provider := fakeprovider.New(small, big, full)
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(10), provider,
		unschedulablePod("trainer", "8"), unschedulablePod("huge", "64"))

	r, err := l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: "trainer"})
	if err != nil {
		t.Fatal(err)
	}
	want := &explain.Report{Pod: "ns/trainer", State: "Unschedulable", SchedulerMessage: "0/0 nodes are available",
		Summary: "triggers a scale-up of big by 1 node(s)", ExistingNodes: "0/0 nodes fit",
		NodeGroups: []explain.GroupVerdict{
			{NodeGroup: "big", Verdict: explain.VerdictScaleUp, Message: "+1 node(s), 0 -> 1 (max 5)"},
			{NodeGroup: "full", Verdict: explain.VerdictNotNeeded},
			{NodeGroup: "small", Verdict: explain.VerdictNotNeeded},
		}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	r, err = l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: "huge"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range r.NodeGroups {
		got[g.NodeGroup] = g.Verdict + " " + g.Reason
	}
	if diff := cmp.Diff(map[string]string{"big": "cannot-help NodeResourcesFit", "small": "cannot-help NodeResourcesFit",
		"full": "cannot-help " + limits.ReasonGroupMax}, got); diff != "" {
		t.Errorf("verdicts for huge (-want +got):\n%s", diff)
	}
	if _, err := l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: "nope"}); err == nil {
		t.Error("explained a pod that does not exist")
	}
	for _, g := range []*fakeprovider.FakeNodeGroup{small, big, full} {
		if calls := g.Calls(); len(calls) != 0 {
			t.Errorf("explain called the provider: %s %+v", g.Id(), calls)
		}
	}
}

// A pass writes the status: groups, and the pods no group helps with why.
func TestRunOnceWritesStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	provider := fakeprovider.New(cpuGroup("small", "4"))
	rec := record.NewFakeRecorder(10)
	l := newLoopWith(t, ctx, func(o *config.Options, _ *autoscaler.Env) {
		o.Namespace, o.StatusConfigMapName, o.SchedulerDisagreementThreshold = "kube-system", "st", time.Minute
	}, testclock.NewFakeClock(t0), rec, provider, unschedulablePod("huge", "64"))
	if _, err := l.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := status.Read(ctx, l.client, "kube-system", "st")
	if err != nil || s == nil {
		t.Fatalf("status %v, %v", s, err)
	}
	if len(s.NodeGroups) != 1 || s.NodeGroups[0].Name != "small" || s.ClusterWide.Health.Status != status.HealthHealthy {
		t.Errorf("status groups %+v health %+v", s.NodeGroups, s.ClusterWide.Health)
	}
	if len(s.PodsNotHelped) != 1 || s.PodsNotHelped[0].Name != "huge" || len(s.PodsNotHelped[0].Reasons) != 1 ||
		s.PodsNotHelped[0].Reasons[0].Reason != "NodeResourcesFit" {
		t.Errorf("pods not helped %+v", s.PodsNotHelped)
	}
}

// A pod held on a node (nominated there) is explained as held while the
// node takes it; one the pods held there before it crowd out of the
// node's only GPU is pending, as the loop plans it (load.Loaded.Unheld).
func TestExplainHeldPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	held := func(name, claim string) *corev1.Pod {
		pod := unschedulablePod(name, "1")
		withClaim := builder.Pod("ns", name).Claim("gpu", claim).Obj()
		pod.Spec.ResourceClaims, pod.Spec.Containers[0].Resources.Claims = withClaim.Spec.ResourceClaims, withClaim.Spec.Containers[0].Resources.Claims
		pod.Status.NominatedNodeName = "n1"
		return pod
	}
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(10), fakeprovider.New(cpuGroup("small", "4")),
		builder.Node("n1").CPU("8").Obj(),
		builder.ResourceSlice("n1-gpus", "n1", "gpu.example.com", "n1").Devices(builder.Device("gpu-0")).Obj(),
		builder.DeviceClass("gpu").Driver("gpu.example.com").Obj(),
		builder.Claim("ns", "c1").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.Claim("ns", "c2").Request(builder.Request("gpu", "gpu")).Obj(),
		held("first", "c1"), held("second", "c2"))
	for name, want := range map[string]string{"first": "Nominated", "second": "Unschedulable"} {
		r, err := l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != want {
			t.Errorf("%s: state %s (%s), want %s", name, r.State, r.Summary, want)
		}
	}
}
