// Package shadow reports what the simulation's checks against the plain
// scheduler framework find (simulator/shortcut): every mismatch is
// counted, logged with its case and told in a Warning event on the pod;
// its stage, just before the pass acts, fails the pass in verify mode
// when anything differed, and starts the next pass's sampling budget.
package shadow

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// StageName is the stage's name.
const StageName = "simulationCheck"

// Message is the log message of a mismatch (the e2e harness looks for it).
const Message = "Simulation shortcut answered differently from the plain scheduler framework"

// EventReason is the Warning event's reason on a pod whose decision a
// shortcut got wrong.
const EventReason = "SimulationShadowMismatch"

// Wire has checker report to m, logger and recorder (nil: no events).
func Wire(checker *shortcut.Checker, m *metrics.Metrics, logger klog.Logger, recorder record.EventRecorder) {
	checker.OnCheck = func(kind string) { m.ShadowChecks.WithLabelValues(kind).Inc() }
	checker.Report = func(mm shortcut.Mismatch) {
		m.ShadowMismatches.WithLabelValues(string(mm.Shortcut)).Inc()
		logger.Error(nil, Message, "shortcut", mm.Shortcut,
			"kind", mm.Kind, "pod", mm.Pod, "class", mm.Class, "node", mm.Node, "nodeGroup", mm.Group, "shortcutSays", mm.Got,
			"frameworkSays", mm.Want, "disabled", checker.DisableOnMismatch && mm.Shortcut != "")
		if recorder == nil || mm.Pod == "" {
			return
		}
		ns, name := split(mm.Pod)
		recorder.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name}, corev1.EventTypeWarning, EventReason, mm.String())
	}
	checker.StartPass()
}

func split(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

// Stage ends a pass's checks before the pass acts: in verify mode, a
// difference fails the pass (kind "simulationMismatch"); the next pass
// gets a fresh budget either way.
func Stage(checker *shortcut.Checker) pass.Stage {
	return pass.Func{ID: StageName, Do: func(context.Context, *pass.State) error {
		err := checker.Err()
		checker.StartPass()
		if err != nil && checker.Verify {
			return pass.Failed("simulationMismatch", err)
		}
		return nil
	}}
}
