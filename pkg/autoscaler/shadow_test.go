package autoscaler_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/shadow"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// poolCluster is four empty nodes alike but for their pool label (a, a,
// b, b) and a pod that selects pool b: with node keys that leave labels
// out (the injected fault), the a-nodes' verdict is read off for the
// b-nodes and the pod fits nowhere.
func poolCluster() []runtime.Object {
	objs := []runtime.Object{}
	for _, n := range []struct{ name, pool string }{{"n1", "a"}, {"n2", "a"}, {"n3", "b"}, {"n4", "b"}} {
		objs = append(objs, builder.Node(n.name).CPU("4").Memory("32Gi").Label("pool", n.pool).Obj())
	}
	pod := unschedulablePod("picky", "1")
	pod.Spec.NodeSelector = map[string]string{"pool": "b"}
	return append(objs, pod)
}

func mismatches(l *fixture, n shortcut.Name) float64 {
	return testutil.ToFloat64(l.Metrics.ShadowMismatches.WithLabelValues(string(n)))
}

func fitOf(st *pass.State, name string) string {
	for p, node := range pass.Get(st, fitexisting.Fits) {
		if p.Name == name {
			return node
		}
	}
	return ""
}

// Verify mode fails the pass on a wrong key, naming the shortcut, the pod
// and the node; with correct keys the same pass goes through.
func TestVerifyModeCatchesAWrongNodeKey(t *testing.T) {
	for _, faulty := range []bool{false, true} {
		t.Run(map[bool]string{false: "correct keys", true: "wrong keys"}[faulty], func(t *testing.T) {
			if faulty {
				t.Cleanup(shortcut.InjectFault(shortcut.NodeKeys))
			}
			_, ctx := ktesting.NewTestContext(t)
			l := newLoopWith(t, ctx, func(o *config.Options, _ *autoscaler.Env) { o.Simulation.Verify = true },
				testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4")), poolCluster()...)
			st, err := l.RunOnce(ctx)
			if !faulty {
				if err != nil || fitOf(st, "picky") != "n3" {
					t.Fatalf("pass: %v, picky on %q; want it on n3", err, fitOf(st, "picky"))
				}
				if checks := testutil.ToFloat64(l.Metrics.ShadowChecks.WithLabelValues("fitExisting")); checks == 0 {
					t.Fatal("no decision checked")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), `fitExisting shortcut "nodeKeys" pod ns/picky`) || !strings.Contains(err.Error(), "node n3") {
				t.Fatalf("pass: %v; want it failed naming nodeKeys, the pod and n3", err)
			}
			if mismatches(l, shortcut.NodeKeys) == 0 || errorsOf(l, "simulationMismatch") != 1 {
				t.Errorf("mismatches %v, errors %v", mismatches(l, shortcut.NodeKeys), errorsOf(l, "simulationMismatch"))
			}
		})
	}
}

// The shadow check, sampled as in production, finds the wrong key without
// failing the pass: counted, a Warning event on the pod; with
// --simulation-shadow-disable-shortcut-on-mismatch the next pass runs
// without node keys and places the pod.
func TestShadowCheckCatchesAWrongNodeKey(t *testing.T) {
	t.Cleanup(shortcut.InjectFault(shortcut.NodeKeys))
	_, ctx := ktesting.NewTestContext(t)
	recorder := record.NewFakeRecorder(100)
	l := newLoopWith(t, ctx, func(o *config.Options, _ *autoscaler.Env) { o.Simulation.DisableShortcutOnMismatch = true },
		testclock.NewFakeClock(t0), recorder, fakeprovider.New(cpuGroup("small", "4")), poolCluster()...)
	st, err := l.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fitOf(st, "picky") != "" || mismatches(l, shortcut.NodeKeys) == 0 {
		t.Fatalf("picky on %q, nodeKeys mismatches %v; want the wrong key to leave it unplaced and be caught", fitOf(st, "picky"), mismatches(l, shortcut.NodeKeys))
	}
	var warned bool
	for _, e := range drain(recorder) {
		warned = warned || strings.HasPrefix(e, corev1.EventTypeWarning+" "+shadow.EventReason+" ") && strings.Contains(e, "ns/picky")
	}
	if !warned {
		t.Error("no SimulationShadowMismatch event on the pod")
	}
	if l.Checker.Set.On(shortcut.NodeKeys) {
		t.Fatal("nodeKeys still on after the mismatch")
	}
	st, err = l.RunOnce(ctx)
	if err != nil || fitOf(st, "picky") != "n3" {
		t.Fatalf("next pass: %v, picky on %q; want n3 without node keys", err, fitOf(st, "picky"))
	}
}

// With correct shortcuts the shadow check checks and finds nothing.
func TestShadowCheckQuietWhenShortcutsAreRight(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	l := newLoop(t, ctx, testclock.NewFakeClock(t0), record.NewFakeRecorder(100), fakeprovider.New(cpuGroup("small", "4"), cpuGroup("big", "16")),
		append(poolCluster(), unschedulablePod("a", "2"), unschedulablePod("b", "8"), unschedulablePod("c", "3"))...)
	for range 3 {
		if _, err := l.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fits, estimates := testutil.ToFloat64(l.Metrics.ShadowChecks.WithLabelValues("fitExisting")), testutil.ToFloat64(l.Metrics.ShadowChecks.WithLabelValues("estimate"))
	if fits == 0 || estimates == 0 {
		t.Fatalf("checks: %v fit-existing, %v estimates; want some of each", fits, estimates)
	}
	for _, n := range shortcut.All {
		if got := mismatches(l, n); got != 0 {
			t.Errorf("%s: %v mismatches", n, got)
		}
	}
}
