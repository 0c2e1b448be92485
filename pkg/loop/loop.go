// Package loop runs the autoscaler's passes: every --scan-interval (or
// soon after new unschedulable pods appear) one pass through a list of
// stages (pkg/pass), in order, over one pass.State. It knows nothing of
// what the stages do: the wiring (pkg/autoscaler) lists them, and each
// stage, in its own package, says what it reads and writes. A dry run
// (explain) runs the same list without the stages that act.
package loop

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// PassMetrics are what the loop tells of its passes (metrics.Metrics).
type PassMetrics interface {
	// Observe records how long function took since start, Activity that
	// activity happened at now, ObserveStage how long a stage took.
	Observe(function string, start time.Time)
	Activity(activity string, now time.Time)
	ObserveStage(stage string, took time.Duration)
	// Failed counts a failed pass by the kind of its error.
	Failed(kind string)
}

// Config is what a loop runs.
type Config struct {
	Stages []pass.Stage
	// Inputs are the keys a pass may be given from outside (explain's
	// pod), Optional those stages may read when no stage writes them (a
	// feature that is off): pass.Check accepts both.
	Inputs, Optional []pass.AnyKey
	Clock            clock.PassiveClock
	Metrics          PassMetrics
	ScanInterval     time.Duration
	// Trigger, if set, starts a pass early (new unschedulable pods).
	Trigger func() <-chan struct{}
	// Recover closes what a pass left open (the snapshot's forks), after a
	// panic or a dry run; nil: nothing to close.
	Recover func()
	// Done is told of every pass that ran to its end (health, metrics);
	// Failed of every pass that failed, with the error (the status).
	// Each may be nil.
	Done   func(ctx context.Context, st *pass.State)
	Failed func(ctx context.Context, st *pass.State, err error)
}

// Loop runs passes over its stages.
type Loop struct{ c Config }

// New checks that the stages form a pass (pass.Check) and returns the
// loop.
func New(c Config) (*Loop, error) {
	if err := pass.Check(c.Stages, c.Inputs, c.Optional...); err != nil {
		return nil, err
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return &Loop{c: c}, nil
}

// Stages are the loop's stages, in order.
func (l *Loop) Stages() []pass.Stage { return l.c.Stages }

// RunOnce is one pass of the loop. A panic inside it (a scheduler plugin
// on a malformed object, a provider's bug, a stage touching a key it did
// not declare) ends the pass as an error instead of the process: nothing
// more acts in it, and the next pass starts afresh from what it observes.
func (l *Loop) RunOnce(ctx context.Context) (*pass.State, error) {
	st := pass.New(l.c.Clock.Now())
	if l.c.Metrics != nil {
		defer l.c.Metrics.Observe("main", st.Started)
		l.c.Metrics.Activity("main", st.Started)
	}
	err := l.run(ctx, st, false, nil)
	if err != nil {
		l.fail(ctx, st, err)
		return st, err
	}
	if l.c.Done != nil {
		l.c.Done(ctx, st)
	}
	return st, nil
}

// DryRun runs the stages that do not act over st, as a pass would, and
// calls after (if set) after each one; an error of after ends the run
// with it. explain runs passes this way. What the stages that act would
// have closed (a ProvisioningRequest's planned launch) is closed at the
// end, as after a panic.
func (l *Loop) DryRun(ctx context.Context, st *pass.State, after func(stage string) error) error {
	err := l.run(ctx, st, true, after)
	if l.c.Recover != nil {
		l.c.Recover()
	}
	return err
}

func (l *Loop) run(ctx context.Context, st *pass.State, dryRun bool, after func(string) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			st.Leave() // the stage that panicked never left
			err = l.recovered(ctx, r)
		}
	}()
	last := time.Now() // durations are wall time whatever the clock: they are for operators
	for _, s := range l.c.Stages {
		if dryRun && s.Acts() {
			continue
		}
		st.Enter(s)
		err := s.Run(ctx, st)
		st.Leave()
		if err != nil {
			var pe *pass.Error
			if errors.As(err, &pe) {
				return err
			}
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
		if l.c.Metrics != nil && !dryRun {
			l.c.Metrics.ObserveStage(s.Name(), time.Since(last))
			last = time.Now()
		}
		if after != nil {
			if err := after(s.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// panicked is an error a stage returns for a panic it recovered (the
// simulator's framework.PanicError): counted as a panic.
type panicked interface{ Panicked() bool }

// fail counts a failed pass and tells it.
func (l *Loop) fail(ctx context.Context, st *pass.State, err error) {
	kind := "simulationError"
	var pe *pass.Error
	if errors.As(err, &pe) {
		kind = pe.Kind
	}
	var p panicked
	if errors.As(err, &p) && p.Panicked() {
		kind = "panic"
	}
	if l.c.Metrics != nil {
		l.c.Metrics.Failed(kind)
	}
	if l.c.Failed != nil {
		l.c.Failed(context.WithoutCancel(ctx), st, err)
	}
}

// recovered ends a pass that panicked: the error and its stack are
// logged, the pass fails as a panic, and what the unwinding left open is
// closed so the next pass can start afresh.
func (l *Loop) recovered(ctx context.Context, r any) error {
	err := fmt.Errorf("panic in the pass: %v", r)
	klog.FromContext(ctx).Error(err, "Recovered from a panic; the pass stops, the next one runs as usual", "stack", string(debug.Stack()))
	if l.c.Recover != nil {
		l.c.Recover()
	}
	return pass.Failed("panic", err)
}

// Run runs passes until ctx ends: every scan interval, and soon after new
// unschedulable pods appear (at most once per second, so a burst of pod
// creations causes one pass, not hundreds).
func (l *Loop) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(l.c.ScanInterval)
	defer ticker.Stop()
	var trigger <-chan struct{}
	for {
		if _, err := l.RunOnce(ctx); err != nil {
			logger.Error(err, "Autoscaler pass failed")
		}
		if l.c.Trigger != nil {
			trigger = l.c.Trigger()
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-trigger:
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}
