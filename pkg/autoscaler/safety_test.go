package autoscaler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// safe reads cluster_autoscaler_cluster_safe_to_autoscale.
func safe(l *fixture) float64 { return testutil.ToFloat64(l.Metrics.ClusterSafeToAutoscale) }

func errorsOf(l *fixture, kind string) float64 {
	return testutil.ToFloat64(l.Metrics.Errors.WithLabelValues(kind))
}

// A panic in a stage ends the pass as an error: counted, nothing acts,
// and the next pass runs as usual.
func TestRunOnceRecoversFromAPanic(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	big := cpuGroup("big", "16")
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(10), fakeprovider.New(big), unschedulablePod("trainer", "8"))
	big.PanicOnce("TemplateNodeInfo", "malformed template of big")
	if _, err := l.RunOnce(ctx); err == nil || !strings.Contains(err.Error(), "panic in the pass: malformed template of big") {
		t.Fatalf("RunOnce error = %v, want the panic", err)
	}
	if got := errorsOf(l, "panic"); got != 1 {
		t.Errorf("errors_total{type=panic} = %v, want 1", got)
	}
	if safe(l) != 0 || len(big.Calls()) != 0 {
		t.Errorf("after the panic: safe to autoscale %v, provider calls %+v; want 0 and none", safe(l), big.Calls())
	}
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatalf("next RunOnce: %v", err)
	}
	if len(pass.Get(st, act.Results)) != 1 || pass.Get(st, act.Results)[0].Added != 1 || safe(l) != 1 || errorsOf(l, "panic") != 1 {
		t.Errorf("next pass: results %+v, safe %v, panics %v; want the scale-up, 1, 1", pass.Get(st, act.Results), safe(l), errorsOf(l, "panic"))
	}
}

// A snapshot that cannot be built fails the pass before anything acts.
func TestRunOnceStopsWhenTheSnapshotFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	big := cpuGroup("big", "16")
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(10), fakeprovider.New(big), unschedulablePod("trainer", "8"))
	snap := l.Runner.Snapshot()
	snap.Fork() // a fork left open: the snapshot cannot be reset
	if _, err := l.RunOnce(ctx); err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("RunOnce error = %v, want the snapshot's", err)
	}
	if errorsOf(l, "snapshotError") != 1 || safe(l) != 0 || len(big.Calls()) != 0 {
		t.Errorf("snapshot errors %v, safe %v, provider calls %+v; want 1, 0, none", errorsOf(l, "snapshotError"), safe(l), big.Calls())
	}
	if err := snap.Revert(); err != nil {
		t.Fatal(err)
	}
	if st, err := l.RunOnce(ctx); err != nil || len(pass.Get(st, act.Results)) != 1 || safe(l) != 1 {
		t.Fatalf("next pass: %v, safe %v, err %v; want the scale-up", st, safe(l), err)
	}
}

// Too many unready nodes: the pass plans, but neither scales up nor
// down, and says why.
func TestRunOnceDoesNotActOnAnUnhealthyCluster(t *testing.T) {
	tests := []struct {
		unready    int
		wantUnsafe string
	}{
		{3, ""}, // within --ok-total-unready-count
		{4, "4 of 5 nodes unready (80%), more than 45% and more than 3"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d unready", tc.unready), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			big := cpuGroup("big", "16")
			objs := []runtime.Object{unschedulablePod("trainer", "8")}
			for i := range 5 - tc.unready {
				objs = append(objs, builder.Node(fmt.Sprintf("up-%d", i)).CPU("1").Obj())
			}
			for i := range tc.unready {
				objs = append(objs, builder.Node(fmt.Sprintf("down-%d", i)).CPU("1").NotReady().Obj())
			}
			l := newLoopWith(t, ctx, func(o *config.Options, _ *autoscaler.Env) {
				o.Namespace, o.StatusConfigMapName = "kube-system", "st"
				o.ScaleDown.MaxParallelism, o.ScaleDown.MaxDrainParallelism, o.ScaleDown.NonEmptyCandidatesCount = 1, 1, 1
			}, testclock.NewFakeClock(t0), record.NewFakeRecorder(10), fakeprovider.New(big), objs...)
			client := l.client

			st, err := l.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pass.Get(st, observe.Unsafe) != tc.wantUnsafe {
				t.Errorf("unsafe = %q, want %q", pass.Get(st, observe.Unsafe), tc.wantUnsafe)
			}
			if pass.Get(st, plan.Result) == nil || len(pass.Get(st, plan.Result).ScaleUps) != 1 {
				t.Fatalf("plan %+v, want the scale-up planned either way", pass.Get(st, plan.Result))
			}
			acted := len(big.Calls()) > 0 || pass.Get(st, scaledown.Done) != nil
			wantSafe, wantHealth := 1.0, status.HealthHealthy
			if tc.wantUnsafe != "" {
				wantSafe, wantHealth = 0, status.HealthUnhealthy
			}
			if acted != (tc.wantUnsafe == "") || safe(l) != wantSafe {
				t.Errorf("provider calls %+v, scale-down ran %v, safe %v; want acting %v", big.Calls(), pass.Get(st, scaledown.Done) != nil, safe(l), tc.wantUnsafe == "")
			}
			s, err := status.Read(ctx, client, "kube-system", "st")
			if err != nil || s == nil {
				t.Fatalf("status %v, %v", s, err)
			}
			if s.ClusterWide.Health.Status != wantHealth || !strings.Contains(s.Message, tc.wantUnsafe) {
				t.Errorf("status health %q message %q, want %q saying %q", s.ClusterWide.Health.Status, s.Message, wantHealth, tc.wantUnsafe)
			}
		})
	}
}
