package estimator

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
)

// TestSeededKeepIsExact keeps, as the planner does, the pods an estimate
// placed, with the estimate's memo sown into the keep
// (EstimateAndKeepFrom), and compares with keeping them with no memo at
// all: the same outcome and the same snapshot, in every memo scenario.
// Where the memo is handed on, the keep must ask the framework less than
// a keep that learns alone; where it must not be (another template
// object, a memo an anti-affinity pod reset), no less.
func TestSeededKeepIsExact(t *testing.T) {
	for _, sc := range memoScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			type kept struct {
				out   outcome
				dump  string
				calls int
			}
			// keep estimates pods and keeps those it placed: from the
			// estimate (seeded), alone (memo), or without memo (plain).
			// otherTmpl keeps with a copy of the template.
			keep := func(mode string, otherTmpl bool) (kept, *Estimate) {
				r, ctx := newRunner(t)
				objs, pods, tmpl := sc.cluster(t)
				snapshottest.Load(t, r.Snapshot(), objs...)
				e := New(r, Options{DisableMemo: mode == "plain"})
				est, err := e.Estimate(ctx, pods, tmpl, "g")
				if err != nil {
					t.Fatal(err)
				}
				placed := make([]*v1.Pod, 0, len(est.Placements))
				for _, p := range est.Placements {
					placed = append(placed, p.Pod)
				}
				var from *Estimate
				if mode == "seeded" {
					from = est
				}
				keptTmpl := tmpl
				if otherTmpl {
					cp := *tmpl
					keptTmpl = &cp
				}
				res, err := e.EstimateAndKeepFrom(ctx, from, placed, keptTmpl, "g")
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				return kept{outcomeOf(res), dump(t, r.Snapshot()), res.FrameworkCalls}, est
			}
			plain, _ := keep("plain", false)
			alone, _ := keep("memo", false)
			seeded, est := keep("seeded", false)
			other, _ := keep("seeded", true)
			for _, k := range []struct {
				name string
				kept
			}{{"seeded", seeded}, {"alone", alone}, {"another template", other}} {
				if !reflect.DeepEqual(k.out, plain.out) {
					t.Fatalf("%s keep %+v differs from the plain one %+v", k.name, k.out, plain.out)
				}
				if k.dump != plain.dump {
					t.Fatalf("%s keep leaves another snapshot:\n%s", k.name, firstDiff(plain.dump, k.dump))
				}
			}
			if other.calls != alone.calls {
				t.Errorf("a keep of another template object asked the framework %d times, alone %d: the seed was used", other.calls, alone.calls)
			}
			switch {
			case est.seed == nil && seeded.calls != alone.calls:
				t.Errorf("no seed, yet the keep asked the framework %d times, alone %d", seeded.calls, alone.calls)
			case est.seed != nil && alone.calls > 0 && seeded.calls >= alone.calls:
				t.Errorf("seeded keep asked the framework %d times, alone %d: the seed did not help", seeded.calls, alone.calls)
			}
			t.Logf("framework calls: estimate %d, keep alone %d, seeded %d (seed: %v)", est.FrameworkCalls, alone.calls, seeded.calls, est.seed != nil)
		})
	}
}

// TestSeedNotHandedOn checks the estimates whose memo must not seed a
// keep: a memo that anti-affinity reset, and an estimate renamed from an
// alike group's.
func TestSeedNotHandedOn(t *testing.T) {
	r, ctx := newRunner(t)
	var objs []any
	var pods []*v1.Pod
	var tmpl *cloudprovider.NodeTemplate
	for _, sc := range memoScenarios() {
		if sc.name == "anti-affinity and spread pods among memoized ones" {
			objs, pods, tmpl = sc.cluster(t)
		}
	}
	if tmpl == nil {
		t.Fatal("the anti-affinity scenario is gone")
	}
	snapshottest.Load(t, r.Snapshot(), objs...)
	e := New(r, Options{})
	est, err := e.Estimate(ctx, pods, tmpl, "g")
	if err != nil {
		t.Fatal(err)
	}
	if est.seed != nil {
		t.Errorf("an estimate that placed an anti-affinity pod hands on its memo")
	}
	r2, ctx2 := newRunner(t)
	objs, pods = sharedScenario()
	snapshottest.Load(t, r2.Snapshot(), objs...)
	a, b := gpuTemplate(8, nil), gpuTemplate(8, nil)
	res, err := New(r2, Options{}).EstimateGroups(ctx2, pods, []TemplateGroup{{Name: "a", Template: a}, {Name: "b", Template: b}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].seed == nil {
		t.Fatalf("group a's estimate has no seed")
	}
	if res[1].FrameworkCalls != 0 || len(res[1].Placements) == 0 {
		t.Fatalf("group b's estimate (%d framework calls, %d placed) was not renamed from a's: the test no longer tests renaming",
			res[1].FrameworkCalls, len(res[1].Placements))
	}
	if res[1].seed != nil {
		t.Errorf("group b's estimate, renamed from a's, carries a's memo")
	}
}

// sharedScenario is a cluster whose pods two alike groups estimate alike.
func sharedScenario() ([]any, []*v1.Pod) {
	pods, objs := ownClaimPods("job", 12, 1)
	return append(classes(), objs...), pods
}
