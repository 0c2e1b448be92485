package act_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestExecute(t *testing.T) {
	quota := errors.New("quota exceeded")
	tests := []struct {
		name   string
		atomic bool
		// failAdding makes the provider fail after adding that many nodes.
		failAdding  int
		failErr     error
		failTarget  bool
		wantCalls   []fakeprovider.Call
		wantAdded   int
		wantErr     error
		wantTracked []int // deltas in flight afterwards
		wantBackoff bool
	}{{
		name:        "increase",
		wantCalls:   []fakeprovider.Call{{Method: "IncreaseSize", Delta: 3}},
		wantAdded:   3,
		wantTracked: []int{3},
	}, {
		name:        "atomic increase",
		atomic:      true,
		wantCalls:   []fakeprovider.Call{{Method: "AtomicIncreaseSize", Delta: 3}},
		wantAdded:   3,
		wantTracked: []int{3},
	}, {
		name:        "partial failure: backed off, what was added is tracked",
		failErr:     quota,
		failAdding:  1,
		wantCalls:   []fakeprovider.Call{{Method: "IncreaseSize", Delta: 3}},
		wantAdded:   1,
		wantErr:     quota,
		wantTracked: []int{1},
		wantBackoff: true,
	}, {
		name:        "atomic failure adds nothing",
		atomic:      true,
		failErr:     quota,
		failAdding:  1,
		wantCalls:   []fakeprovider.Call{{Method: "AtomicIncreaseSize", Delta: 3}},
		wantErr:     quota,
		wantBackoff: true,
	}, {
		name:       "target size unknown: nothing asked",
		failTarget: true,
		wantErr:    quota,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			g := fakeprovider.NewGroup("gpu", 0, 10)
			g.SetTarget(2)
			if tc.failErr != nil {
				g.FailIncrease(tc.failErr, tc.failAdding)
			}
			if tc.failTarget {
				g.Fail("TargetSize", quota)
			}
			b := backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour)
			tr := track.New(15*time.Minute, b)
			pods := []*corev1.Pod{builder.Pod("ns", "p").Obj()}
			up := act.ScaleUp{Group: &nodegroups.Info{Group: g, Id: "gpu", Target: 2, Max: 10}, Delta: 3, Atomic: tc.atomic, Pods: pods}

			res := act.New(tr, b).Execute(ctx, []act.ScaleUp{up}, now)
			if len(res) != 1 {
				t.Fatalf("%d results, want 1", len(res))
			}
			if res[0].Added != tc.wantAdded || !errors.Is(res[0].Err, tc.wantErr) || len(res[0].Pods) != 1 {
				t.Errorf("result added %d err %v pods %d, want added %d err %v and the pod", res[0].Added, res[0].Err, len(res[0].Pods), tc.wantAdded, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, g.Calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			var tracked []int
			for _, r := range tr.InFlight() {
				tracked = append(tracked, r.Delta)
				if !r.Time.Equal(now) || !r.ExpectedBy.Equal(now.Add(15*time.Minute)) {
					t.Errorf("request %+v: want made now, expected in 15m", r)
				}
			}
			if diff := cmp.Diff(tc.wantTracked, tracked); diff != "" {
				t.Errorf("tracked deltas (-want +got):\n%s", diff)
			}
			st, off := b.Get("gpu", now)
			if off != tc.wantBackoff || (off && st.Reason != track.ReasonCloudProvider) {
				t.Errorf("backoff %+v active %v, want active %v with reason %s", st, off, tc.wantBackoff, track.ReasonCloudProvider)
			}
		})
	}
}

func TestExecuteInOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	b := backoff.New(time.Minute, time.Hour, time.Hour)
	tr := track.New(time.Hour, b)
	a, c := fakeprovider.NewGroup("a", 0, 5), fakeprovider.NewGroup("c", 0, 5)
	a.FailIncrease(errors.New("stockout"), 0)
	res := act.New(tr, b).Execute(ctx, []act.ScaleUp{
		{Group: &nodegroups.Info{Group: a, Id: "a"}, Delta: 1},
		{Group: &nodegroups.Info{Group: c, Id: "c"}, Delta: 2},
	}, now)
	if len(res) != 2 || res[0].Group.Id != "a" || res[0].Err == nil || res[1].Group.Id != "c" || res[1].Added != 2 || res[1].Err != nil {
		t.Errorf("results = %+v, want a failed then c grown by 2", res)
	}
	if c.Target() != 2 {
		t.Errorf("c target = %d: a failure must not stop later scale-ups", c.Target())
	}
}
