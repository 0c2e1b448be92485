package report_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A message that changes every loop is sent at most 5 times at once, then
// once a minute.
func TestNotHelpedRateLimited(t *testing.T) {
	pod := builder.Pod("ns", "p").Obj()
	rec := record.NewFakeRecorder(100)
	r := report.New(rec, metrics.New(), repeat)
	sent := func(from, to int, every time.Duration) int {
		for i := from; i < to; i++ {
			reasons := map[types.UID][]plan.GroupReason{pod.UID: {{Group: "g", Reason: "max-nodes-total", Message: fmt.Sprintf("room for %d", i)}}}
			r.NotHelped([]*corev1.Pod{pod}, reasons, t0.Add(time.Duration(i)*every))
		}
		return len(drain(rec))
	}
	if n := sent(0, 30, time.Second); n != 5 {
		t.Errorf("30 changes in 30s: %d events, want the burst of 5", n)
	}
	// 10 more minutes of changes every 10s: one a minute.
	if n := sent(3, 63, 10*time.Second); n < 9 || n > 11 {
		t.Errorf("changes every 10s for 10 minutes: %d events, want about 10", n)
	}
}
