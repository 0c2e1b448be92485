package builder

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

// SchedulerProfileBuilder builds a kube-scheduler profile
// (kubescheduler.config.k8s.io/v1) with the default plugins and the
// plugin arguments set on it.
type SchedulerProfileBuilder struct {
	name     string
	affinity *corev1.NodeAffinity
	spread   []corev1.TopologySpreadConstraint
}

// SchedulerProfile starts the profile of schedulerName.
func SchedulerProfile(schedulerName string) *SchedulerProfileBuilder {
	return &SchedulerProfileBuilder{name: schedulerName}
}

// AddedAffinity sets NodeAffinityArgs.addedAffinity: node affinity the
// profile adds to every pod it schedules.
func (b *SchedulerProfileBuilder) AddedAffinity(a *corev1.NodeAffinity) *SchedulerProfileBuilder {
	b.affinity = a.DeepCopy()
	return b
}

// RequireNodeLabel sets an addedAffinity requiring key In values.
func (b *SchedulerProfileBuilder) RequireNodeLabel(key string, values ...string) *SchedulerProfileBuilder {
	return b.AddedAffinity(&corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}}}}}})
}

// HardDefaultSpread adds a default topology spread constraint with
// whenUnsatisfiable DoNotSchedule (the List defaulting type): the
// profile spreads by it the pods without constraints of their own that
// a Service, ReplicaSet, ReplicationController or StatefulSet selects.
func (b *SchedulerProfileBuilder) HardDefaultSpread(topologyKey string, maxSkew int32) *SchedulerProfileBuilder {
	b.spread = append(b.spread, corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: topologyKey,
		WhenUnsatisfiable: corev1.DoNotSchedule})
	return b
}

// Obj returns the profile. It fails only on arguments that do not
// marshal, which the builder's own types always do.
func (b *SchedulerProfileBuilder) Obj() (configv1.KubeSchedulerProfile, error) {
	name := b.name
	p := configv1.KubeSchedulerProfile{SchedulerName: &name}
	add := func(plugin string, args any) error {
		raw, err := json.Marshal(args)
		if err != nil {
			return fmt.Errorf("scheduler profile %s: %s args: %w", b.name, plugin, err)
		}
		p.PluginConfig = append(p.PluginConfig, configv1.PluginConfig{Name: plugin, Args: runtime.RawExtension{Raw: raw}})
		return nil
	}
	if b.affinity != nil {
		if err := add("NodeAffinity", configv1.NodeAffinityArgs{AddedAffinity: b.affinity.DeepCopy()}); err != nil {
			return p, err
		}
	}
	if len(b.spread) > 0 {
		args := configv1.PodTopologySpreadArgs{DefaultingType: configv1.ListDefaulting,
			DefaultConstraints: append([]corev1.TopologySpreadConstraint(nil), b.spread...)}
		if err := add("PodTopologySpread", args); err != nil {
			return p, err
		}
	}
	return p, nil
}

// SchedulerProfilesYAML renders profiles as the profiles section of a
// KubeSchedulerConfiguration ("profiles:" and its list), for a file that
// sets other fields too.
func SchedulerProfilesYAML(profiles ...*SchedulerProfileBuilder) (string, error) {
	var out struct {
		Profiles []configv1.KubeSchedulerProfile `json:"profiles"`
	}
	for _, b := range profiles {
		p, err := b.Obj()
		if err != nil {
			return "", err
		}
		out.Profiles = append(out.Profiles, p)
	}
	data, err := yaml.Marshal(out)
	return string(data), err
}

// SchedulerConfigYAML is a whole KubeSchedulerConfiguration, kube-scheduler's
// --config format, of profiles and defaults for everything else.
func SchedulerConfigYAML(profiles ...*SchedulerProfileBuilder) (string, error) {
	section, err := SchedulerProfilesYAML(profiles...)
	if err != nil {
		return "", err
	}
	return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + section, nil
}
