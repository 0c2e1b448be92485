package loop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

var (
	planned = pass.NewKey[[]string]("test/planned")
	made    = pass.NewKey[int]("test/made")
)

// metrics records what the loop tells.
type metrics struct {
	stages []string
	failed []string
}

func (m *metrics) Observe(string, time.Time)                  {}
func (m *metrics) Activity(string, time.Time)                 {}
func (m *metrics) ObserveStage(stage string, _ time.Duration) { m.stages = append(m.stages, stage) }
func (m *metrics) Failed(kind string)                         { m.failed = append(m.failed, kind) }

// world is a pass of three stages: one plans, one acts on the plan, one
// reads what was made.
func world(ran *[]string, fail error) []pass.Stage {
	return []pass.Stage{
		pass.Func{ID: "plan", Out: pass.Keys(planned), Do: func(_ context.Context, st *pass.State) error {
			*ran = append(*ran, "plan")
			pass.Put(st, planned, []string{"a", "b"})
			return nil
		}},
		pass.Func{ID: "act", Acting: true, In: pass.Keys(planned), Out: pass.Keys(made), Do: func(_ context.Context, st *pass.State) error {
			*ran = append(*ran, "act")
			pass.Put(st, made, len(pass.Get(st, planned)))
			return fail
		}},
		pass.Func{ID: "report", Acting: true, In: pass.Keys(made), Do: func(_ context.Context, st *pass.State) error {
			*ran = append(*ran, "report")
			return nil
		}},
	}
}

// The loop runs the stages in order and times each; a dry run (explain)
// runs those that do not act, and tells after each.
func TestRunOnceAndDryRun(t *testing.T) {
	var ran []string
	m := &metrics{}
	l, err := loop.New(loop.Config{Stages: world(&ran, nil), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"plan", "act", "report"}, ran); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"plan", "act", "report"}, m.stages); diff != "" {
		t.Errorf("timed (-want +got):\n%s", diff)
	}
	if pass.Get(st, made) != 2 {
		t.Errorf("made %d, want 2", pass.Get(st, made))
	}
	ran = nil
	var after []string
	if err := l.DryRun(context.Background(), pass.New(time.Now()), func(s string) error { after = append(after, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"plan"}, ran); diff != "" || len(after) != 1 {
		t.Errorf("dry run ran %v, told %v; want the planning stage only", ran, after)
	}
}

// A stage list in which a stage reads what no stage before it writes is
// refused when the loop is made, naming it.
func TestNewRefusesStagesThatDoNotFit(t *testing.T) {
	var ran []string
	stages := world(&ran, nil)
	_, err := loop.New(loop.Config{Stages: []pass.Stage{stages[1], stages[0]}})
	if err == nil || !strings.Contains(err.Error(), `stage act reads "test/planned", which no stage before it writes`) {
		t.Fatalf("New: %v, want the misplaced stage named", err)
	}
}

// recoveredPanic is a panic a stage recovered itself (as the simulator's
// framework.PanicError is).
type recoveredPanic struct{}

func (recoveredPanic) Error() string  { return "plugin panicked" }
func (recoveredPanic) Panicked() bool { return true }

// A stage's error ends the pass with its kind, a panic (here a stage
// touching a key it did not declare, or one the stage recovered) with
// "panic"; the failure is told, and the next pass runs afresh.
func TestFailedPasses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stages   func(ran *[]string) []pass.Stage
		kind     string
		err      string
		recovers bool
	}{
		{"a stage's error", func(ran *[]string) []pass.Stage {
			return world(ran, pass.Failed("cloudProviderError", errors.New("provider down")))
		}, "cloudProviderError", "provider down", false},
		{"an undeclared key", func(ran *[]string) []pass.Stage {
			return append(world(ran, nil), pass.Func{ID: "sneaky", Do: func(_ context.Context, st *pass.State) error {
				pass.Get(st, planned)
				return nil
			}})
		}, "panic", `stage sneaky: read of key "test/planned", which it does not declare`, true},
		{"a panic the stage recovered", func(ran *[]string) []pass.Stage {
			return world(ran, fmt.Errorf("simulating: %w", recoveredPanic{}))
		}, "panic", "plugin panicked", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			m := &metrics{}
			var told error
			recovered := 0
			l, err := loop.New(loop.Config{Stages: tc.stages(&ran), Metrics: m, Recover: func() { recovered++ },
				Failed: func(_ context.Context, _ *pass.State, err error) { told = err }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.RunOnce(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.err) || told != err {
				t.Fatalf("RunOnce: %v (told %v), want %q told", err, told, tc.err)
			}
			if diff := cmp.Diff([]string{tc.kind}, m.failed); diff != "" {
				t.Errorf("failed kinds (-want +got):\n%s", diff)
			}
			if tc.recovers != (recovered == 1) {
				t.Errorf("Recover called %d times", recovered)
			}
		})
	}
}
