package estimator

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// The scheduler profile's arguments (framework.ProfileArgs) are read by
// the filters as if they were part of every pod: addedAffinity selects
// nodes for each pod, hard default spread constraints spread the pods
// without constraints of their own. So wherever a shortcut asks what a
// pod's scheduling reads (node keys, group sharing, the memoizable and
// carry rules, class closing), it asks framework.ProfileArgs.AddedTo as
// well as the pod: sharing.addPod for label keys and node names, spreadOf
// for "does this pod read other nodes".

// spreadOf is the topology spread the scheduler applies to pod: its own
// constraints, else the profile's hard defaults.
func spreadOf(pod *v1.Pod, profile *framework.ProfileArgs) []v1.TopologySpreadConstraint {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		return pod.Spec.TopologySpreadConstraints
	}
	return profile.AddedTo(pod).Spread
}

// LogProfile says, once at start, which shortcuts the profile's
// arguments change: a user who set them wonders why estimates got slower.
func (e *Estimator) LogProfile(logger klog.Logger) {
	if e == nil || e.runner == nil {
		return
	}
	p := e.runner.Profile()
	if a := p.AddedAffinity; a != nil {
		s := &sharing{read: map[string]bool{}}
		if s.addNodeAffinity(a) {
			keys := make([]string, 0, len(s.read))
			for k := range s.read {
				keys = append(keys, k)
			}
			logger.Info("Scheduler profile adds node affinity to every pod: its label keys tell nodes and node groups apart",
				"profile", p.SchedulerName, "labelKeys", keys)
		} else {
			logger.Info("Scheduler profile adds node affinity by node name to every pod: node keys and node group sharing are off",
				"profile", p.SchedulerName)
		}
	}
	if len(p.HardDefaultSpread) > 0 {
		keys := make([]string, 0, len(p.HardDefaultSpread))
		for _, c := range p.HardDefaultSpread {
			keys = append(keys, c.TopologyKey)
		}
		logger.Info("Scheduler profile has hard default topology spread: pods without constraints of their own are placed one by one (no memoised verdicts, node keys, class closing or carried estimates)",
			"profile", p.SchedulerName, "topologyKeys", keys)
	}
}
