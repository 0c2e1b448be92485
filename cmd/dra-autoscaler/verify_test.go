package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/test/scale"
)

// The loop benchmark's scenarios, at a reduced size, with
// --simulation-verify: every fit-existing decision and every estimate of
// the pass is checked against the plain framework, and a difference
// fails the pass (so the scenario's checks fail). Verify mode costs
// several times a pass: BenchmarkLoopPassVerified reports by how much.
func TestLoopPassVerified(t *testing.T) {
	for name, gen := range verifiedScenarios() {
		t.Run(name, func(t *testing.T) {
			r := passes(t, nil, gen, []string{"--simulation-verify"})
			checks := 0.0
			for _, k := range []string{"fitExisting", "estimate", "carry", "removal", "removalCopy"} {
				checks += testutil.ToFloat64(r.metrics.ShadowChecks.WithLabelValues(k))
			}
			if checks == 0 {
				t.Fatal("nothing was checked")
			}
			carried := testutil.ToFloat64(r.metrics.ShadowChecks.WithLabelValues("carry"))
			if strings.HasPrefix(name, "L2-distinct") && carried == 0 {
				t.Error("no carried estimate was checked")
			}
			// D1's pods fill destinations of one kind: placements were
			// copied, and verify mode compared each with the framework's.
			copied := testutil.ToFloat64(r.metrics.ShadowChecks.WithLabelValues("removalCopy"))
			if strings.HasPrefix(name, "D1") && copied == 0 {
				t.Error("no copied removal placement was checked")
			}
			t.Logf("%v decisions checked, %v of them carried estimates, %v removal copies", checks, carried, copied)
			// The fake server holds one copy of the cluster, the
			// informers' (newClient): memory as in production.
			if r.static == 0 || r.shared != r.static {
				t.Errorf("the fake server serves the informers' copy of %d of its %d objects, want all", r.shared, r.static)
			}
		})
	}
}

// TestLoopPassGangs is a twentieth of G1 (10 gangs of 8 over two
// topology levels on a small L2) in verify mode: the pass plans exactly 8
// new nodes a gang, and the simulation agrees with the framework (copied
// placements included).
func TestLoopPassGangs(t *testing.T) {
	gangGates(t)
	small := scale.GangLayout{Layout: scale.Layout{Nodes: 250, Pending: 500, Groups: 20, ExistingGroups: 2, Pools: 9, Shapes: 50, FitEvery: 5, Used: 4},
		Gangs: 10, Blocks: 2, Racks: 4}
	r := passes(t, nil, func() scale.Scenario { return scale.BusyGangs(small) },
		[]string{"--simulation-verify", "--feature-gates=" + gangFeatureGates})
	if n := len(pass.Get(r.pass, plan.Gangs)); n != 10 {
		t.Errorf("%d gangs planned, want 10", n)
	}
	// Blocks and racks of fresh instances are alike: copies were made,
	// and verify mode tried each for real.
	if n := testutil.ToFloat64(r.metrics.ShadowChecks.WithLabelValues("placement")); n == 0 {
		t.Error("no copied placement was checked")
	}
}

// TestLoopPassConsolidation is D2 at a fiftieth of its size in verify
// mode, with the gates that let the autoscaler read PodGroups: exactly
// the nodes the pods can leave start going (check), no node whose pod a
// PodDisruptionBudget holds, and each gang's two nodes together or
// neither.
func TestLoopPassConsolidation(t *testing.T) {
	gangGates(t)
	r := passes(t, nil, func() scale.Scenario { return scale.Consolidation(100) },
		[]string{"--simulation-verify", "--feature-gates=" + gangFeatureGates})
	removed := map[string]bool{}
	for _, n := range pass.Get(r.pass, scaledown.Done).Started {
		removed[n] = true
	}
	const full = 40
	for u := range 60 {
		node := fmt.Sprintf("node-%d", full+u)
		switch u % 10 {
		case 0:
			if removed[node] {
				t.Errorf("%s is being removed: its pod's PodDisruptionBudget allows no disruption", node)
			}
		case 1:
			other := fmt.Sprintf("node-%d", full+u+1)
			if removed[node] != removed[other] {
				t.Errorf("gang nodes %s (removed: %v) and %s (removed: %v) split: the gang leaves only together", node, removed[node], other, removed[other])
			}
		}
	}
	if n := testutil.ToFloat64(r.metrics.ShadowChecks.WithLabelValues("removal")); n == 0 {
		t.Error("no removal was checked")
	}
}

// BenchmarkLoopPassVerified is TestLoopPassVerified's passes, timed,
// each in verify mode and as it runs by default: the cost of verify mode.
func BenchmarkLoopPassVerified(b *testing.B) {
	for name, gen := range verifiedScenarios() {
		for _, verify := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/verify=%v", name, verify), func(b *testing.B) {
				passes(b, b, gen, []string{fmt.Sprintf("--simulation-verify=%v", verify)})
			})
		}
	}
}

// verifiedScenarios are L1, L2 (and the pass after L2's, with groups
// unlike, with a pod pinned to a GPU) and D1 at about a twentieth of
// their size.
func verifiedScenarios() map[string]func() scale.Scenario {
	small := scale.Layout{Nodes: 250, Pending: 500, Groups: 20, ExistingGroups: 2, Pools: 9, Shapes: 50, FitEvery: 5, Used: 4}
	return map[string]func() scale.Scenario{
		"L1/pods=200":       func() scale.Scenario { return scale.ScaleFromZero(200) },
		"L2/nodes=250":      func() scale.Scenario { return scale.Busy(small) },
		"L2-next/nodes=250": func() scale.Scenario { sc := scale.Busy(small); sc.Next = true; return sc },
		// No two new groups alike: each round carries the chosen pool's
		// other group with only the pods it had no room for.
		"L2-distinct/nodes=250": func() scale.Scenario { l := small; l.Distinct = true; return scale.Busy(l) },
		// A pod asks for a GPU by its uuid: keys hold every device's.
		"L2-pinned/nodes=250": func() scale.Scenario { l := small; l.Pinned = true; return scale.Busy(l) },
		// ...to a GPU a running pod holds: no new node is planned for it.
		"L2-pinned-taken/nodes=250": func() scale.Scenario { l := small; l.PinnedTaken = true; return scale.Busy(l) },
		"D1/nodes=40":               func() scale.Scenario { return scale.ScaleDownDRA(40) },
	}
}
