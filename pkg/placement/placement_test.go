package placement

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A spent budget leaves pods unranked, except the pod ranked last: a
// checked decision asks for it twice (the plain framework's way, then
// the shortcuts'), and both must rank alike.
func TestRankingBudgetKeepsTheLastPodRanked(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := New(r, fragmentation.NewAnalyzer(r), fragmentation.NewShapes(time.Hour),
		config.SharingOptions{FragmentationAwarePlacement: true, PlacementRankingBudget: time.Second})
	unranked := prometheus.NewCounter(prometheus.CounterOpts{Name: "unranked"})
	p.Unranked = unranked
	a, b := builder.Pod("ns", "a").Obj(), builder.Pod("ns", "b").Obj()
	nodes := []string{"n1", "n2"}
	p.StartPass()
	steps := []struct {
		pod   string
		spent bool // the budget is spent before the ask
		want  float64
	}{
		{"a", false, 0},
		{"a", true, 0}, // asked again: ranked again
		{"b", true, 1},
		{"a", true, 1}, // b was not ranked: a is still the last ranked
		{"b", true, 2},
	}
	for i, s := range steps {
		pod := a
		if s.pod == "b" {
			pod = b
		}
		if s.spent {
			p.pass.spent = p.Budget
		}
		if _, err := p.RankFeasible(ctx, pod, nodes); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(unranked); got != s.want {
			t.Errorf("step %d (pod %s): %v pods unranked, want %v", i, s.pod, got, s.want)
		}
	}
}
