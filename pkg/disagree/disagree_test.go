package disagree

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func unschedulable(p *corev1.Pod, msg string) *corev1.Pod {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg}}
	return p
}

func TestDetector(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := unschedulable(builder.Pod("ns", "a").Obj(), "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}.")
	b := unschedulable(builder.Pod("ns", "b").Obj(), "")
	ready := map[string]string{"n1": ""}
	steps := []struct {
		at         time.Duration
		placed     map[*corev1.Pod]string
		want       []string // pod names in disagreement
		wantEvents int
		wantTotal  float64
	}{
		{0, map[*corev1.Pod]string{a: "n1", b: "upcoming-0"}, nil, 0, 0},
		{4 * time.Minute, map[*corev1.Pod]string{a: "n1"}, nil, 0, 0},
		{5 * time.Minute, map[*corev1.Pod]string{a: "n1", b: "n1"}, []string{"a"}, 1, 1},
		// Told once, counted once, still in the gauge.
		{6 * time.Minute, map[*corev1.Pod]string{a: "n1", b: "n1"}, []string{"a"}, 0, 1},
		// a no longer placed: forgotten; b's clock started at 5m.
		{10 * time.Minute, map[*corev1.Pod]string{b: "n1"}, []string{"b"}, 1, 2},
		{11 * time.Minute, nil, nil, 0, 2},
	}
	m := metrics.New()
	rec := record.NewFakeRecorder(10)
	d := New(5*time.Minute, rec, m)
	for i, st := range steps {
		got := d.Update(st.placed, ready, t0.Add(st.at))
		var names []string
		for _, g := range got {
			names = append(names, g.Name)
		}
		if strings.Join(names, ",") != strings.Join(st.want, ",") {
			t.Fatalf("step %d: disagreements %v, want %v", i, names, st.want)
		}
		if n := len(rec.Events); n != st.wantEvents {
			t.Fatalf("step %d: %d events, want %d", i, n, st.wantEvents)
		}
		for range st.wantEvents {
			ev := <-rec.Events
			if !strings.Contains(ev, ReasonSchedulerDisagreement) || !strings.Contains(ev, "node n1") {
				t.Errorf("step %d: event %q", i, ev)
			}
			if strings.Contains(ev, " a ") && !strings.Contains(ev, "untolerated taint") {
				t.Errorf("step %d: event does not quote the scheduler: %q", i, ev)
			}
		}
		if v := testutil.ToFloat64(m.SchedulerDisagreements); v != st.wantTotal {
			t.Fatalf("step %d: total %v, want %v", i, v, st.wantTotal)
		}
		if v := testutil.ToFloat64(m.SchedulerDisagreementPods); v != float64(len(st.want)) {
			t.Fatalf("step %d: gauge %v, want %d", i, v, len(st.want))
		}
	}
}

// A node that registered but never became usable keeps the simulation's
// pods waiting on it: past the threshold that is a disagreement too, and
// the event says what the node lacks.
func TestDetectorNotUsableNode(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := unschedulable(builder.Pod("ns", "c").Obj(), "0/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.")
	registered := map[string]string{"n1": "", "gpu-7": "node is not Ready"}
	rec := record.NewFakeRecorder(10)
	d := New(5*time.Minute, rec, metrics.New())
	if got := d.Update(map[*corev1.Pod]string{c: "gpu-7"}, registered, t0); len(got) != 0 {
		t.Fatalf("before the threshold: %v", got)
	}
	got := d.Update(map[*corev1.Pod]string{c: "gpu-7"}, registered, t0.Add(5*time.Minute))
	if len(got) != 1 || got[0].NodeNotUsable != "node is not Ready" {
		t.Fatalf("at the threshold: %+v", got)
	}
	ev := <-rec.Events
	for _, want := range []string{ReasonSchedulerDisagreement, "node gpu-7", "not usable (node is not Ready)", "waited 5m0s", "not-ready"} {
		if !strings.Contains(ev, want) {
			t.Errorf("event %q lacks %q", ev, want)
		}
	}
	// Once the node is usable the same placement is an ordinary one.
	registered["gpu-7"] = ""
	got = d.Update(map[*corev1.Pod]string{c: "gpu-7"}, registered, t0.Add(6*time.Minute))
	if len(got) != 1 || got[0].NodeNotUsable != "" || strings.Contains(got[0].Message(t0.Add(6*time.Minute)), "not usable") {
		t.Fatalf("after the node became usable: %+v", got)
	}
}
