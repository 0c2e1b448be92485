package autoscaler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/actuator"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/planner"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/removal"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// newScaleDown wires the scale-down stage over drainer. policies are the
// other rules that may keep nodes or order removals for every pass (the
// reservations come with each pass's count). check holds the
// simulation's shortcuts and checks them.
func newScaleDown(opts *config.Options, runner *framework.Runner, client kubernetes.Interface, recorder record.EventRecorder,
	m *metrics.Metrics, drainer *drain.Drainer, check *shortcut.Checker, policies ...planner.NodePolicy) *scaledown.Controller {
	sd := opts.ScaleDown
	// The removal memo's classes are the estimator's; an estimator of its
	// own, so that scale-down's class cache never meets the planner's.
	classes := estimator.New(runner, estimator.Options{})
	p := planner.New(runner, planner.Options{
		Class: func(pod *corev1.Pod) string {
			if key, memoizable := classes.ClassOf(pod); memoizable {
				return key
			}
			return ""
		},
		Keys: func(pods []*corev1.Pod) (removal.DestinationKeys, error) {
			keys, err := estimator.NewNodeKeys(runner.Snapshot(), runner.Profile(), pods)
			if keys == nil {
				return nil, err
			}
			return keys, nil
		},
		Copier:     classes,
		Shortcuts:  check.Set,
		Check:      check,
		Thresholds: eligibility.Thresholds{Utilization: sd.UtilizationThreshold, GPU: sd.GPUUtilizationThreshold},
		Rules: drainability.Rules{SkipNodesWithLocalStorage: sd.SkipNodesWithLocalStorage, SkipNodesWithSystemPods: sd.SkipNodesWithSystemPods,
			SkipNodesWithCustomControllerPods: sd.SkipNodesWithCustomControllerPods},
		UnneededTime:          sd.UnneededTime,
		UnreadyEnabled:        sd.UnreadyEnabled,
		UnreadyTime:           sd.UnreadyTime,
		MaxParallelism:        sd.MaxParallelism,
		MaxDrainParallelism:   sd.MaxDrainParallelism,
		MaxNonEmptyCandidates: sd.NonEmptyCandidatesCount,
		Policies:              policies,
	})
	a := actuator.New(client, drainer, recorder, clock.RealClock{}, actuator.Options{
		Cordon:                   sd.CordonNodeBeforeTerminating,
		EvictDaemonSetsOfEmpty:   sd.DaemonSetEvictionForEmptyNodes,
		EvictDaemonSetsOfDrained: sd.DaemonSetEvictionForOccupiedNodes,
	})
	return scaledown.New(sd, opts.ScanInterval, p, a, client, recorder, m.ScaleDown)
}

// newDrainer is the one eviction path: scale-down drains and the drains of
// ending capacity blocks share its grace period cap and eviction count.
func newDrainer(opts *config.Options, client kubernetes.Interface, recorder record.EventRecorder, m *metrics.Metrics) *drain.Drainer {
	d := drain.New(client, recorder, clock.RealClock{}, drain.Options{
		MaxGracefulTermination: opts.ScaleDown.MaxGracefulTermination,
		MaxPodEvictionTime:     opts.ScaleDown.MaxPodEvictionTime,
	})
	d.OnEvicted = func(*corev1.Pod) { m.ScaleDown.EvictedPods.Inc() }
	return d
}
