package scaledown

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/actuator"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/planner"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type noPDBs struct{}

// testStage is a stage over a real simulated scheduler and a fake
// clientset holding objs; the snapshot holds objs too.
func testStage(t *testing.T, opts config.ScaleDownOptions, clk clock.Clock, objs ...runtime.Object) (*Controller, *actuator.Remover, *record.FakeRecorder, *metrics.Metrics) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var loaded []any
	for _, o := range objs {
		loaded = append(loaded, o)
	}
	snapshottest.Load(t, runner.Snapshot(), loaded...)
	var apiObjs []runtime.Object
	for _, o := range objs {
		if _, isPod := o.(*corev1.Pod); !isPod {
			apiObjs = append(apiObjs, o)
		}
	}
	client := fake.NewClientset(apiObjs...)
	rec := record.NewFakeRecorder(100)
	m := metrics.New()
	p := planner.New(runner, planner.Options{Thresholds: eligibility.Thresholds{Utilization: 0.5, GPU: 0.5}, MaxParallelism: 10, MaxNonEmptyCandidates: 30})
	a := actuator.New(client, drain.New(client, rec, clk, drain.Options{MaxPodEvictionTime: time.Second}), rec, clk, actuator.Options{})
	return New(opts, 10*time.Second, p, a, client, rec, m.ScaleDown), a, rec, m
}

func (noPDBs) PodDisruptionBudgets() ([]*policyv1.PodDisruptionBudget, error) { return nil, nil }

// TestCooldowns: with the unneeded time at zero, the empty node would go
// on every pass; only the cooldowns hold it back.
func TestCooldowns(t *testing.T) {
	tests := []struct {
		name string
		// prepare runs before the first pass and tells when the second runs.
		prepare      func(s *Controller, g *fakeprovider.FakeNodeGroup) time.Duration
		wantCooldown string
		wantRemoved  bool
	}{
		{name: "no cooldown", prepare: func(*Controller, *fakeprovider.FakeNodeGroup) time.Duration { return 0 }, wantRemoved: true},
		{name: "after a scale-up", prepare: func(s *Controller, _ *fakeprovider.FakeNodeGroup) time.Duration {
			s.NoteScaleUp(t0)
			return 9 * time.Minute
		}, wantCooldown: "scale-down-delay-after-add"},
		{name: "after the scale-up cooldown", prepare: func(s *Controller, _ *fakeprovider.FakeNodeGroup) time.Duration {
			s.NoteScaleUp(t0)
			return 10 * time.Minute
		}, wantRemoved: true},
		{name: "after a failure", prepare: func(s *Controller, g *fakeprovider.FakeNodeGroup) time.Duration {
			g.Fail("DeleteNodes", errors.New("provider down"))
			return time.Minute
		}, wantCooldown: "scale-down-delay-after-failure"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			g := fakeprovider.NewGroup("g", 0, 5)
			node := builder.Node("n1").Obj()
			node.Spec.ProviderID = g.AddInstance(cloudprovider.InstanceRunning, nil)
			g.SetTarget(1)
			opts := config.DefaultScaleDown()
			opts.UnneededTime = 0
			// The actuator's clock is the loop's: outcomes are stamped t0.
			s, a, _, m := testStage(t, opts, testclock.NewFakeClock(t0), node)
			in := func(now time.Time) ControllerInput {
				return ControllerInput{State: &observe.ClusterState{Nodes: []*corev1.Node{node}}, PDBs: noPDBs{},
					Groups: []*nodegroups.Info{{Group: g, Id: "g", Max: 5, Target: 1, Ready: []*corev1.Node{node}}}, Nodes: []string{"n1"}, Now: now}
			}

			second := tc.prepare(s, g)
			first, err := s.Run(ctx, in(t0))
			if err != nil {
				t.Fatal(err)
			}
			a.Wait()
			if tc.wantCooldown == "scale-down-delay-after-add" {
				if len(first.Started) != 0 {
					t.Fatalf("removal started right after a scale-up: %v", first.Started)
				}
			}
			g.Fail("DeleteNodes", nil)
			if second == 0 {
				if fmt.Sprint(first.Started) != "[n1]" {
					t.Fatalf("first pass started %v, cooldown %q", first.Started, first.Cooldown)
				}
				return
			}
			res, err := s.Run(ctx, in(t0.Add(second)))
			if err != nil {
				t.Fatal(err)
			}
			a.Wait()
			if res.Cooldown != tc.wantCooldown || (len(res.Started) > 0) != tc.wantRemoved {
				t.Fatalf("second pass: cooldown %q started %v; want cooldown %q removed %v", res.Cooldown, res.Started, tc.wantCooldown, tc.wantRemoved)
			}
			if got := testutil.ToFloat64(m.ScaleDown.UnneededNodes); got != 1 {
				t.Errorf("unneeded_nodes_count %v, want 1", got)
			}
		})
	}
}

// Bad input is evented once per warnEvery, not every pass.
func TestWarningsDeduplicated(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	node := builder.Node("n1").Obj()
	node.Annotations = map[string]string{eligibility.ScaleDownDisabledAnnotation: "maybe"}
	s, _, rec, m := testStage(t, config.DefaultScaleDown(), clock.RealClock{}, node)
	g := fakeprovider.NewGroup("g", 0, 5)
	for _, at := range []time.Duration{0, time.Minute, 11 * time.Minute} {
		in := ControllerInput{State: &observe.ClusterState{Nodes: []*corev1.Node{node}}, PDBs: noPDBs{},
			Groups: []*nodegroups.Info{{Group: g, Id: "g", Max: 5, Target: 1, Ready: []*corev1.Node{node}}}, Nodes: []string{"n1"}, Now: t0.Add(at)}
		if _, err := s.Run(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	close(rec.Events)
	var warnings []string
	for e := range rec.Events {
		if strings.HasPrefix(e, "Warning InvalidAnnotation") {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 2 {
		t.Fatalf("warnings %q, want one at start and one after %s", warnings, warnEvery)
	}
	if got := testutil.ToFloat64(m.ScaleDown.UnremovableNodes.WithLabelValues(eligibility.ScaleDownDisabled)); got != 1 {
		t.Errorf("unremovable_nodes_count{reason=ScaleDownDisabledAnnotation} = %v, want 1", got)
	}
}

// A deletion taint left by a previous process on a node of our groups is
// taken off on the first pass; other nodes' taints are not ours.
func TestLeftoverTaintsCleaned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ours := builder.Node("ours").Taint(drain.ToBeDeletedTaint, "1", corev1.TaintEffectNoSchedule).CPU("4").Obj()
	theirs := builder.Node("theirs").Taint(drain.ToBeDeletedTaint, "1", corev1.TaintEffectNoSchedule).Obj()
	busy := builder.Pod("app", "busy").CPU("3").Node("ours").Obj()
	s, _, _, _ := testStage(t, config.DefaultScaleDown(), clock.RealClock{}, ours, theirs, busy)
	g := fakeprovider.NewGroup("g", 0, 5)
	in := ControllerInput{State: &observe.ClusterState{Nodes: []*corev1.Node{ours, theirs}, Pods: []*corev1.Pod{busy}}, PDBs: noPDBs{},
		Groups: []*nodegroups.Info{{Group: g, Id: "g", Max: 5, Target: 1, Ready: []*corev1.Node{ours}}}, Nodes: []string{"ours", "theirs"}, Now: t0}
	if _, err := s.Run(ctx, in); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"ours": false, "theirs": true} {
		n, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := eligibility.HasToBeDeletedTaint(n); got != want {
			t.Errorf("%s tainted = %v, want %v", name, got, want)
		}
	}
}

// An unready node of a group reaches the planner, which decides by
// --scale-down-unready-*; a node that is ready but still booting (its
// devices not published) does not.
func TestUnreadyNodesReachThePlanner(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	g := fakeprovider.NewGroup("g", 0, 5)
	up, down, starting := builder.Node("up").Obj(), builder.Node("down").NotReady().Obj(), builder.Node("starting").Obj()
	s, _, _, _ := testStage(t, config.DefaultScaleDown(), testclock.NewFakeClock(t0), up, down, starting)
	res, err := s.Run(ctx, ControllerInput{State: &observe.ClusterState{Nodes: []*corev1.Node{up, down, starting}}, PDBs: noPDBs{},
		Groups: []*nodegroups.Info{{Group: g, Id: "g", Max: 5, Target: 3, Ready: []*corev1.Node{up}, Booting: []*corev1.Node{down, starting}}},
		Nodes:  []string{"down", "starting", "up"}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range res.Plan.Unneeded {
		seen[n] = "unneeded"
	}
	for n, u := range res.Plan.Unremovable {
		seen[n] = u.Reason
	}
	// The test's planner leaves --scale-down-unready-enabled off.
	want := map[string]string{"up": "unneeded", "down": eligibility.ScaleDownUnreadyDisabled}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("planner saw %v, want %v", seen, want)
	}
}

// Every removal the plan chose asks the safety gate: what it refuses (here
// the pass's --max-empty-bulk-delete of 1) is not started, and the pass
// says so.
func TestRemovalsAskTheGate(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	g := fakeprovider.NewGroup("g", 0, 5)
	var nodes []*corev1.Node
	var objs []runtime.Object
	for _, name := range []string{"n1", "n2"} {
		n := builder.Node(name).Obj()
		n.Spec.ProviderID = g.AddInstance(cloudprovider.InstanceRunning, nil)
		nodes = append(nodes, n)
		objs = append(objs, n)
	}
	g.SetTarget(2)
	opts := config.DefaultScaleDown()
	opts.UnneededTime = 0
	s, a, _, _ := testStage(t, opts, testclock.NewFakeClock(t0), objs...)
	gate := safety.New(safety.Options{MaxEmptyBulk: 1}, nil, nil)
	s.WithGate(gate)
	groups := []*nodegroups.Info{{Group: g, Id: "g", Max: 5, Target: 2, Ready: nodes}}
	gate.Open(safety.OpenInput{Groups: groups, Now: t0})
	res, err := s.Run(ctx, ControllerInput{State: &observe.ClusterState{Nodes: nodes}, PDBs: noPDBs{}, Groups: groups, Nodes: []string{"n1", "n2"}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	a.Wait()
	if len(res.Started) != 1 || len(res.Refused) != 1 || res.Refused[0].Rule != safety.RuleBudget {
		t.Fatalf("started %v, refused %+v; want one of each, by the budget", res.Started, res.Refused)
	}
}

// A group's own options (resolved by nodegroups.ResolveOptions) reach
// the removal planner only when its provider set them.
func TestGroupOptions(t *testing.T) {
	opts := config.DefaultScaleDown()
	flags := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: opts.UtilizationThreshold,
		ScaleDownGpuUtilizationThreshold: opts.GPUUtilizationThreshold, ScaleDownUnneededTime: opts.UnneededTime, ScaleDownUnreadyTime: opts.UnreadyTime}
	with := func(f func(*cloudprovider.NodeGroupAutoscalingOptions)) cloudprovider.NodeGroupAutoscalingOptions {
		o := flags
		f(&o)
		return o
	}
	tests := []struct {
		name string
		from string
		o    cloudprovider.NodeGroupAutoscalingOptions
		want planner.RemovalGroup
	}{
		{name: "the flags'", from: nodegroups.OptionsFromFlags, o: flags},
		{name: "an unneeded time", from: nodegroups.OptionsFromProvider, o: with(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownUnneededTime = time.Hour }),
			want: planner.RemovalGroup{UnneededTime: time.Hour, UnreadyTime: opts.UnreadyTime}},
		{name: "thresholds", from: nodegroups.OptionsFromProvider, o: with(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownGpuUtilizationThreshold = 0.1 }),
			want: planner.RemovalGroup{Thresholds: &eligibility.Thresholds{Utilization: opts.UtilizationThreshold, GPU: 0.1},
				UnneededTime: opts.UnneededTime, UnreadyTime: opts.UnreadyTime}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _, _ := testStage(t, opts, testclock.NewFakeClock(t0))
			var got planner.RemovalGroup
			s.groupOptions(&nodegroups.Info{Id: "g", Options: tc.o, OptionsFrom: tc.from}, &got)
			if fmt.Sprintf("%v %v %v", got.Thresholds, got.UnneededTime, got.UnreadyTime) !=
				fmt.Sprintf("%v %v %v", tc.want.Thresholds, tc.want.UnneededTime, tc.want.UnreadyTime) {
				t.Errorf("group options %v %v %v, want %v %v %v", got.Thresholds, got.UnneededTime, got.UnreadyTime,
					tc.want.Thresholds, tc.want.UnneededTime, tc.want.UnreadyTime)
			}
		})
	}
}

// A unit of two nodes, one idle and one busy: the idle node stays with
// its unit unless --scale-down-partial-units lets units shrink.
func TestPartialUnits(t *testing.T) {
	const clique = "nvidia.com/gpu.clique"
	tmpl := &cloudprovider.NodeTemplate{Node: builder.Node("racks-template").
		Annotation(cloudprovider.AnnotationUnitSize, "2").Annotation(cloudprovider.AnnotationTopologyPerRequest, clique).Obj()}
	for _, tc := range []struct {
		partial bool
		want    string
	}{{false, planner.UnitNotWhole}, {true, "unneeded"}} {
		t.Run(fmt.Sprintf("partial=%v", tc.partial), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			g := fakeprovider.NewGroup("racks", 0, 4)
			idle := builder.Node("idle").CPU("4").Memory("16Gi").Label(clique, "a").Obj()
			busy := builder.Node("busy").CPU("4").Memory("16Gi").Label(clique, "a").Obj()
			work := builder.Pod("ns", "work").CPU("3").Memory("1Gi").Node("busy").OwnedBy("apps/v1", "ReplicaSet", "work").Obj()
			opts := config.DefaultScaleDown()
			opts.PartialUnits = tc.partial
			s, _, _, _ := testStage(t, opts, testclock.NewFakeClock(t0), idle, busy, work)
			nodes := []*corev1.Node{idle, busy}
			res, err := s.Run(ctx, ControllerInput{State: &observe.ClusterState{Nodes: nodes, Pods: []*corev1.Pod{work}}, PDBs: noPDBs{},
				Groups: []*nodegroups.Info{{Group: g, Id: "racks", Max: 4, Target: 2, Ready: nodes, Template: tmpl}},
				Nodes:  []string{"busy", "idle"}, Now: t0})
			if err != nil {
				t.Fatal(err)
			}
			got := res.Plan.Unremovable["idle"].Reason
			if slices.Contains(res.Plan.Unneeded, "idle") {
				got = "unneeded"
			}
			if got != tc.want {
				t.Errorf("idle node: %q, want %q", got, tc.want)
			}
		})
	}
}
