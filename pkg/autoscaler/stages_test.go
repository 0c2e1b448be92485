package autoscaler_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
)

// Every stage a pass runs records its time once.
func TestStagesAreTimed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4")), unschedulablePod("a", "2"))
	if _, err := l.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Loop.Stages() {
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
