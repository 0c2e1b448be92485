package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
)

// recorder is a no-op stage that notes that it ran and what the pass held
// when it did: what a feature outside the loop adds with one Extension.
type recorder struct {
	name string
	acts bool
	ran  *[]string
}

func (r recorder) Name() string { return r.name }
func (r recorder) Acts() bool   { return r.acts }
func (r recorder) Run(_ context.Context, p *loop.Pass) error {
	*r.ran = append(*r.ran, r.name+":"+strings.Join(planned(p), ","))
	return nil
}

func planned(p *loop.Pass) []string {
	var out []string
	if p.Plan != nil {
		for _, up := range p.Plan.ScaleUps {
			out = append(out, up.Group.Id)
		}
	}
	return out
}

func TestExtensionsRunWhereRegistered(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var ran []string
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4")), unschedulablePod("a", "2"))
	l.Extensions = []loop.Extension{
		{After: loop.StageAct, Stage: recorder{name: "afterAct", acts: true, ran: &ran}},
		{After: loop.StageFitExisting, Stage: recorder{name: "beforePlan", ran: &ran}},
		{After: "beforePlan", Stage: recorder{name: "afterBeforePlan", ran: &ran}},
		{After: loop.StageFitExisting, Stage: recorder{name: "secondBeforePlan", ran: &ran}},
	}
	if _, err := l.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"beforePlan:", "afterBeforePlan:", "secondBeforePlan:", "afterAct:small"}
	if diff := cmp.Diff(want, ran); diff != "" {
		t.Errorf("extensions ran (-want +got):\n%s", diff)
	}

	// explain runs the same pass, without the stages that act.
	ran = nil
	if _, err := l.Explain(ctx, types.NamespacedName{Namespace: "ns", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"beforePlan:", "afterBeforePlan:", "secondBeforePlan:"}, ran); diff != "" {
		t.Errorf("explain ran (-want +got):\n%s", diff)
	}
}

func TestExtensionAfterNoStageFailsThePass(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var ran []string
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4")))
	l.Extensions = []loop.Extension{{After: "plna", Stage: recorder{name: "typo", ran: &ran}}}
	_, err := l.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), `"typo" is registered after "plna"`) {
		t.Fatalf("RunOnce error %v, want one naming the misplaced stage", err)
	}
	if len(ran) != 0 {
		t.Errorf("stages ran: %v", ran)
	}
}

// Every stage a pass runs, extensions included, records its time once.
func TestStagesAreTimed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var ran []string
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4")), unschedulablePod("a", "2"))
	l.Extensions = []loop.Extension{{After: loop.StageAct, Stage: recorder{name: "afterAct", acts: true, ran: &ran}}}
	if _, err := l.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	stages, err := l.Stages()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stages {
		if got := histogramCount(t, l.Metrics.StageDuration.WithLabelValues(s.Name()).(prometheus.Histogram)); got != 1 {
			t.Errorf("stage %s timed %d times, want 1", s.Name(), got)
		}
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
