package framework

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// ProfileArgs is what the running profile's plugin arguments add to the
// scheduling of pods beyond their own specs. The filters read it; the
// shortcuts that decide from a pod's spec what the filters read
// (simulator/estimator's node keys, group sharing, memo and carry rules,
// fit-existing's class rules) must read it too, or they copy a verdict
// the profile does not give. Built once with the Runner, never modified.
type ProfileArgs struct {
	// SchedulerName is the profile's: the pods it schedules.
	SchedulerName string
	// AddedAffinity is NodeAffinityArgs.addedAffinity when the profile
	// runs the NodeAffinity plugin: its required selector is applied to
	// every pod on top of the pod's own. Nil without.
	AddedAffinity *v1.NodeAffinity
	// HardDefaultSpread are PodTopologySpreadArgs' default constraints
	// with whenUnsatisfiable DoNotSchedule, when the profile filters with
	// PodTopologySpread. Only the List defaulting type has any: the
	// System defaults are ScheduleAnyway, which only scoring reads.
	HardDefaultSpread []v1.TopologySpreadConstraint
}

// PodAdditions is what a profile adds to one pod's scheduling.
type PodAdditions struct {
	// NodeAffinity is the profile's addedAffinity (nil: none).
	NodeAffinity *v1.NodeAffinity
	// Spread are the hard default constraints that may apply to the pod.
	Spread []v1.TopologySpreadConstraint
}

// AddedTo says what the profile adds to pod's scheduling: the added
// affinity, to every pod; the hard default spread constraints, to a pod
// with no constraints of its own. The plugin applies the defaults only
// when a Service, ReplicationController, ReplicaSet or StatefulSet
// selects the pod; that changes without the pod changing while verdicts
// are kept by pod, so the defaults are taken to apply to every pod
// without constraints (costing shortcuts, never exactness). A nil pod
// gets what every pod gets.
func (p *ProfileArgs) AddedTo(pod *v1.Pod) PodAdditions {
	if p == nil {
		return PodAdditions{}
	}
	a := PodAdditions{NodeAffinity: p.AddedAffinity}
	if pod != nil && len(pod.Spec.TopologySpreadConstraints) == 0 {
		a.Spread = p.HardDefaultSpread
	}
	return a
}

// profileArgs reads profile's plugin arguments for the plugins the built
// framework runs (enabled: the framework's own list, after the profile's
// multiPoint and per-point settings are merged).
func profileArgs(profile *config.KubeSchedulerProfile, enabled *config.Plugins) *ProfileArgs {
	out := &ProfileArgs{SchedulerName: profile.SchedulerName}
	runs := func(name string, points ...*config.PluginSet) bool {
		for _, set := range points {
			if set != nil && slices.ContainsFunc(set.Enabled, func(p config.Plugin) bool { return p.Name == name }) {
				return true
			}
		}
		return false
	}
	var filter, score *config.PluginSet
	if enabled != nil {
		filter, score = &enabled.Filter, &enabled.Score
	}
	for _, pc := range profile.PluginConfig {
		switch args := pc.Args.(type) {
		case *config.NodeAffinityArgs:
			// Scores read the preferred terms: kept too, as the pods' own
			// preferred terms are.
			if pc.Name == names.NodeAffinity && args.AddedAffinity != nil && runs(names.NodeAffinity, filter, score) {
				out.AddedAffinity = args.AddedAffinity.DeepCopy()
			}
		case *config.PodTopologySpreadArgs:
			if pc.Name != names.PodTopologySpread || args.DefaultingType != config.ListDefaulting || !runs(names.PodTopologySpread, filter) {
				continue
			}
			for _, c := range args.DefaultConstraints {
				if c.WhenUnsatisfiable == v1.DoNotSchedule {
					out.HardDefaultSpread = append(out.HardDefaultSpread, *c.DeepCopy())
				}
			}
		}
	}
	return out
}
