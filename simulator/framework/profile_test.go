package framework

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// TestProfileArgs: the runner reads the profile's addedAffinity and hard
// default spread constraints, and only for the plugins the profile runs.
func TestProfileArgs(t *testing.T) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: accel\n"
	const affinity = `  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: example.com/pool, operator: In, values: [accel]}
`
	const spread = `  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
      - {maxSkew: 2, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
`
	disable := func(plugin string) string {
		return "  plugins:\n    multiPoint:\n      disabled:\n      - name: " + plugin + "\n"
	}
	pool := &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "example.com/pool", Operator: v1.NodeSelectorOpIn, Values: []string{"accel"}}}}}}}
	zone := []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}}
	tests := []struct {
		name string
		cfg  string // "" is the default configuration
		want ProfileArgs
	}{
		{"default configuration", "", ProfileArgs{SchedulerName: v1.DefaultSchedulerName}},
		{"added affinity", head + affinity, ProfileArgs{SchedulerName: "accel", AddedAffinity: pool}},
		{"added affinity of a plugin not run", head + disable("NodeAffinity") + affinity, ProfileArgs{SchedulerName: "accel"}},
		{"hard defaults of a List, not the soft ones", head + spread, ProfileArgs{SchedulerName: "accel", HardDefaultSpread: zone}},
		{"defaults of a plugin not run", head + disable("PodTopologySpread") + spread, ProfileArgs{SchedulerName: "accel"}},
		{"System defaults are soft", head + "  pluginConfig:\n  - name: PodTopologySpread\n    args: {defaultingType: System}\n",
			ProfileArgs{SchedulerName: "accel"}},
	}
	built, err := builder.SchedulerConfigYAML(builder.SchedulerProfile("accel").RequireNodeLabel("example.com/pool", "accel").
		HardDefaultSpread(v1.LabelTopologyZone, 1))
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name string
		cfg  string
		want ProfileArgs
	}{"the test builder's profile", built, ProfileArgs{SchedulerName: "accel", AddedAffinity: pool, HardDefaultSpread: zone}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts Options
			if tc.cfg != "" {
				opts.ConfigFile = filepath.Join(t.TempDir(), "sched.yaml")
				if err := os.WriteFile(opts.ConfigFile, []byte(tc.cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, ctx := ktesting.NewTestContext(t)
			r, err := New(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Profile(); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("Profile() = %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// TestProfileAddedTo: the added affinity goes to every pod, the default
// spread only to pods without constraints of their own.
func TestProfileAddedTo(t *testing.T) {
	zone := []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: v1.DoNotSchedule}}
	p := &ProfileArgs{AddedAffinity: &v1.NodeAffinity{}, HardDefaultSpread: zone}
	plain := builder.Pod(ns, "plain").Obj()
	own := builder.Pod(ns, "own").Obj()
	own.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway}}
	if got := p.AddedTo(plain); got.NodeAffinity != p.AddedAffinity || !reflect.DeepEqual(got.Spread, zone) {
		t.Errorf("pod without constraints: %+v", got)
	}
	if got := p.AddedTo(own); got.NodeAffinity != p.AddedAffinity || got.Spread != nil {
		t.Errorf("pod with a constraint of its own (the plugin applies no default then): %+v", got)
	}
	if got := p.AddedTo(nil); got.NodeAffinity != p.AddedAffinity || got.Spread != nil {
		t.Errorf("every pod: %+v", got)
	}
	if got := (*ProfileArgs)(nil).AddedTo(plain); got.NodeAffinity != nil || got.Spread != nil {
		t.Errorf("no profile: %+v", got)
	}
}
