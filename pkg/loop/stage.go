package loop

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
)

// Stage is one step of a pass, in the spirit of the scheduler framework's
// extension points: a name (for logs, metrics and errors) and a Run over
// the pass's state, which it reads and extends for the stages after it.
// A stage that changes the world (the provider, the API server) says so
// in Acts, and a dry run (explain) leaves it out.
type Stage interface {
	Name() string
	Run(ctx context.Context, p *Pass) error
	Acts() bool
}

// state is what the stages hand on within a pass, besides the Pass fields
// they fill for tests and the status.
type state struct {
	cluster *observe.ClusterState
	built   *load.Loaded
	// reserved is the pass's count of the reservations (nil: none).
	reserved *reservations.Count
	// planner is the scale-up planner for this pass (with its count).
	planner *plan.Planner
	// gangs, loose and waiting split the pending pods; usage counts the
	// cluster for limits and is taken from by each scale-up planned.
	gangs   []*gang.Gang
	loose   []*corev1.Pod
	waiting []gang.Waiting
	usage   limits.Usage
	ups     []act.ScaleUp
	// extra are pods to plan for although the pass might not pick them
	// (the pod explain is asked about); added are those it did not pick.
	extra, added []*corev1.Pod
}

// stageError is a stage's failure with the kind errors_total counts it as.
type stageError struct {
	kind string
	err  error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// failed wraps err of kind ("cloudProviderError", "snapshotError", ...).
func failed(kind string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{kind: kind, err: err}
}

// stage is a Stage from a function: most stages are a few lines over the
// parts the loop holds.
type stage struct {
	name string
	acts bool
	run  func(ctx context.Context, p *Pass) error
}

func (s stage) Name() string                           { return s.name }
func (s stage) Acts() bool                             { return s.acts }
func (s stage) Run(ctx context.Context, p *Pass) error { return s.run(ctx, p) }

// Extension is a stage a feature registers: it runs right after the stage
// named After (one of the Stage* names or an earlier extension's name),
// reading what the stages before it left in the pass. Several extensions
// after one stage run in the order given.
type Extension struct {
	After string
	Stage Stage
}

// extend places the extensions into the pass, each after the stage it
// names and the extensions placed there before it. One whose After names
// no stage is an error, so a misspelt registration fails the pass loudly
// instead of never running.
func extend(base []Stage, ext []Extension) ([]Stage, error) {
	placed := make([]bool, len(ext))
	out := make([]Stage, 0, len(base)+len(ext))
	var after func(name string)
	after = func(name string) {
		for i, e := range ext {
			if !placed[i] && e.After == name {
				placed[i] = true
				out = append(out, e.Stage)
				after(e.Stage.Name())
			}
		}
	}
	for _, s := range base {
		out = append(out, s)
		after(s.Name())
	}
	for i, e := range ext {
		if !placed[i] {
			return nil, fmt.Errorf("stage %q is registered after %q, which is not a stage of the pass", e.Stage.Name(), e.After)
		}
	}
	return out, nil
}

// runStages runs the stages in order; a dry run skips those that act.
// after, if set, is called after each stage that ran.
func runStages(ctx context.Context, stages []Stage, p *Pass, dryRun bool, after func(name string) error) error {
	for _, s := range stages {
		if dryRun && s.Acts() {
			continue
		}
		if err := s.Run(ctx, p); err != nil {
			if _, ok := err.(*stageError); ok {
				return err
			}
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
		if after != nil {
			if err := after(s.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}
