package report_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const repeat = 5 * time.Minute

// drain returns the events recorded so far.
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

func TestNotHelpedDeduplicates(t *testing.T) {
	pod := builder.Pod("ns", "p").Obj()
	full := map[types.UID][]plan.GroupReason{pod.UID: {{Group: "gpu", Reason: "node-group-max-size", Message: "node group at 4 of max 4"}}}
	cooling := map[types.UID][]plan.GroupReason{pod.UID: {{Group: "gpu", Reason: "backoff"}}}
	const fullMsg = "Normal NotTriggerScaleUp pod didn't trigger scale-up: gpu: node-group-max-size: node group at 4 of max 4"
	steps := []struct {
		name    string
		at      time.Duration
		reasons map[types.UID][]plan.GroupReason
		want    []string
	}{
		{"first time", 0, full, []string{fullMsg}},
		{"same message within the repeat interval", time.Minute, full, nil},
		{"same message just before the interval ends", repeat - time.Second, full, nil},
		{"same message once the interval has passed", repeat, full, []string{fullMsg}},
		{"a new message at once", repeat + time.Second, cooling, []string{"Normal NotTriggerScaleUp pod didn't trigger scale-up: gpu: backoff"}},
		{"the old message again is a change too", repeat + 2*time.Second, full, []string{fullMsg}},
		{"no reasons at all", repeat + 3*time.Second, nil, []string{"Normal NotTriggerScaleUp pod didn't trigger scale-up: no node group can help"}},
	}
	rec := record.NewFakeRecorder(10)
	r := report.New(rec, metrics.New(), repeat)
	for _, s := range steps {
		r.NotHelped([]*corev1.Pod{pod}, s.reasons, t0.Add(s.at))
		if diff := cmp.Diff(s.want, drain(rec)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestForgetResends(t *testing.T) {
	a, b := builder.Pod("ns", "a").Obj(), builder.Pod("ns", "b").Obj()
	rec := record.NewFakeRecorder(10)
	r := report.New(rec, metrics.New(), repeat)
	pods := []*corev1.Pod{a, b}
	r.NotHelped(pods, nil, t0)
	if got := len(drain(rec)); got != 2 {
		t.Fatalf("%d events, want 2", got)
	}
	// b is gone (and, say, recreated with the same UID): it is told again.
	r.Forget(map[types.UID]bool{a.UID: true})
	r.NotHelped(pods, nil, t0.Add(time.Second))
	if diff := cmp.Diff([]string{"Normal NotTriggerScaleUp pod didn't trigger scale-up: no node group can help"}, drain(rec)); diff != "" {
		t.Errorf("events after Forget (-want +got):\n%s", diff)
	}
}

func TestNotHelpedMetric(t *testing.T) {
	m := metrics.New()
	r := report.New(record.NewFakeRecorder(10), m, repeat)
	a, b := builder.Pod("ns", "a").Obj(), builder.Pod("ns", "b").Obj()
	r.NotHelped([]*corev1.Pod{a, b}, map[types.UID][]plan.GroupReason{
		a.UID: {{Group: "small", Reason: "NodeResourcesFit"}, {Group: "medium", Reason: "NodeResourcesFit"}, {Group: "gpu", Reason: "backoff"}},
		b.UID: {{Group: "small", Reason: "NodeResourcesFit"}},
	}, t0)
	// Pods by reason: a pod rejected by several groups for the same reason
	// counts once.
	for reason, want := range map[string]float64{"NodeResourcesFit": 2, "backoff": 1} {
		if got := testutil.ToFloat64(m.UnneededPodsNotHelped.WithLabelValues(reason)); got != want {
			t.Errorf("pods not helped by %s = %v, want %v", reason, got, want)
		}
	}
	// The next loop's numbers replace the last ones.
	r.NotHelped([]*corev1.Pod{a}, map[types.UID][]plan.GroupReason{a.UID: {{Group: "gpu", Reason: "backoff"}}}, t0)
	if n := testutil.CollectAndCount(m.UnneededPodsNotHelped); n != 1 {
		t.Errorf("%d reasons reported, want only backoff", n)
	}
}

func TestScaleUps(t *testing.T) {
	m := metrics.New()
	rec := record.NewFakeRecorder(10)
	r := report.New(rec, m, repeat)
	gpu := &nodegroups.Info{Id: "gpu", Target: 1, Max: 10}
	cpu := &nodegroups.Info{Id: "cpu", Target: 0, Max: 3}
	train, web := builder.Pod("ns", "train").Obj(), builder.Pod("ns", "web").Obj()
	r.ScaleUps([]act.LaunchResult{
		{ScaleUp: act.ScaleUp{Group: gpu, Delta: 2, Pods: []*corev1.Pod{train}}, Added: 2},
		{ScaleUp: act.ScaleUp{Group: cpu, Delta: 3, Pods: []*corev1.Pod{web}}, Added: 1, Err: errors.New("node group cpu: increase by 3: quota exceeded")},
	}, t0)
	want := []string{
		"Normal TriggeredScaleUp pod triggered scale-up: [{gpu 1->3 (max: 10)}]",
		"Warning FailedScaleUp scale-up of cpu failed: node group cpu: increase by 3: quota exceeded",
	}
	if diff := cmp.Diff(want, drain(rec)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for name, tc := range map[string]struct{ got, want float64 }{
		"scaled up gpu":        {testutil.ToFloat64(m.ScaledUpNodes.WithLabelValues("gpu")), 2},
		"scaled up cpu":        {testutil.ToFloat64(m.ScaledUpNodes.WithLabelValues("cpu")), 1},
		"failed scale-ups":     {testutil.ToFloat64(m.FailedScaleUps.WithLabelValues("cloudProviderError")), 1},
		"last scale-up (unix)": {testutil.ToFloat64(m.LastActivity.WithLabelValues("scaleUp")), float64(t0.Unix())},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", name, tc.got, tc.want)
		}
	}
}

func TestGroupsMetrics(t *testing.T) {
	m := metrics.New()
	r := report.New(record.NewFakeRecorder(1), m, repeat)
	ready := builder.Node("ready").Obj()
	booting := builder.Node("booting").NotReady().Obj()
	r.Groups([]*nodegroups.Info{
		{Id: "gpu", Min: 0, Max: 8, Target: 4, Ready: []*corev1.Node{ready}, Booting: []*corev1.Node{booting}},
		{Id: "cpu", Min: 1, Max: 3, Target: 1},
	}, []*corev1.Node{ready, booting, builder.Node("other").Obj()})
	for name, tc := range map[string]struct{ got, want float64 }{
		"groups":        {testutil.ToFloat64(m.NodeGroupsCount), 2},
		"gpu min":       {testutil.ToFloat64(m.NodeGroupMinCount.WithLabelValues("gpu")), 0},
		"gpu max":       {testutil.ToFloat64(m.NodeGroupMaxCount.WithLabelValues("gpu")), 8},
		"gpu target":    {testutil.ToFloat64(m.NodeGroupTargetCount.WithLabelValues("gpu")), 4},
		"cpu min":       {testutil.ToFloat64(m.NodeGroupMinCount.WithLabelValues("cpu")), 1},
		"nodes ready":   {testutil.ToFloat64(m.NodesCount.WithLabelValues("ready")), 2},
		"nodes unready": {testutil.ToFloat64(m.NodesCount.WithLabelValues("unready")), 1},
		// gpu: 4 targeted, 2 registered; cpu: 1 targeted, none registered.
		"nodes not started": {testutil.ToFloat64(m.NodesCount.WithLabelValues("notStarted")), 3},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", name, tc.got, tc.want)
		}
	}
}
