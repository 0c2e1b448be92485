package estimator

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Unplaced pods are kept as runs of the order: consecutive pods with one
// verdict make one run; a gap, another verdict or limit, or a pod of
// other storage starts the next. All gives back every pod in order.
func TestUnplacedPodsRuns(t *testing.T) {
	var order []*v1.Pod
	for i := range 8 {
		order = append(order, builder.Pod(ns, fmt.Sprintf("p-%d", i)).Obj())
	}
	fit, dra := &framework.NodeResult{Plugin: "NodeResourcesFit"}, &framework.NodeResult{Plugin: "DynamicResources"}
	lone := builder.Pod(ns, "lone").Obj()
	type step struct {
		i      int // index in order; -1: lone, a pod of other storage
		result *framework.NodeResult
		limit  string
	}
	for _, tc := range []struct {
		name  string
		steps []step
		runs  []int // the runs' lengths
	}{
		{"one class", []step{{0, fit, ""}, {1, fit, ""}, {2, fit, ""}}, []int{3}},
		{"a placed pod between", []step{{0, fit, ""}, {2, fit, ""}}, []int{1, 1}},
		{"another verdict", []step{{0, fit, ""}, {1, fit, ""}, {2, dra, ""}, {3, dra, ""}}, []int{2, 2}},
		{"a limit", []step{{0, fit, ""}, {1, noVerdict, LimitMaxNodes}, {2, noVerdict, LimitMaxNodes}}, []int{1, 2}},
		{"other storage", []step{{0, fit, ""}, {-1, fit, ""}, {1, fit, ""}}, []int{1, 1, 1}},
		{"to the end", []step{{6, fit, ""}, {7, fit, ""}}, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u UnplacedPods
			var want []string
			for _, s := range tc.steps {
				if s.i < 0 {
					u.addRun([]*v1.Pod{lone}, s.result, s.limit)
					want = append(want, "lone "+s.result.Plugin+s.limit)
					continue
				}
				u.add(order, s.i, s.result, s.limit)
				want = append(want, order[s.i].Name+" "+s.result.Plugin+s.limit)
			}
			var runs []int
			for _, r := range u.runs {
				runs = append(runs, len(r.pods))
			}
			if !slices.Equal(runs, tc.runs) {
				t.Errorf("runs of %v pods, want %v", runs, tc.runs)
			}
			var got []string
			for x := range u.All() {
				got = append(got, x.Pod.Name+" "+x.Result.Plugin+x.Limit)
			}
			if !slices.Equal(got, want) || u.Len() != len(want) {
				t.Errorf("All gave %q (Len %d), want %q", got, u.Len(), want)
			}
		})
	}
}
