package capi

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
)

// TestGroupDefaults: what the absent webhooks would have set is there, and
// the selector selects the Machines the template makes.
func TestGroupDefaults(t *testing.T) {
	cases := []struct {
		name     string
		obj      *unstructured.Unstructured
		own      string // the group's own name label
		infra    string // kind of the infrastructure ref
		rollout  bool
		selector bool
		replicas int64
	}{
		{"machine deployment", MachineDeployment("ns", "c1", "gpu", "tmpl", Replicas(3), Bounds(0, 4)), DeploymentNameLabel, infra.KindMachineTemplate, true, true, 3},
		{"machine set", MachineSet("ns", "c1", "gpu", "tmpl"), SetNameLabel, infra.KindMachineTemplate, false, true, 0},
		{"machine pool", MachinePool("ns", "c1", "gpu", "pool", Replicas(1)), PoolNameLabel, infra.KindMachinePool, false, false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.obj.Object
			if tc.obj.GetLabels()[ClusterNameLabel] != "c1" {
				t.Errorf("labels %v, want the cluster-name label", tc.obj.GetLabels())
			}
			if r, found, _ := unstructured.NestedInt64(o, "spec", "replicas"); !found || r != tc.replicas {
				t.Errorf("replicas %d (set %v), want %d", r, found, tc.replicas)
			}
			tmplLabels, _, _ := unstructured.NestedStringMap(o, "spec", "template", "metadata", "labels")
			if tmplLabels[ClusterNameLabel] != "c1" || tmplLabels[tc.own] != "gpu" {
				t.Errorf("template labels %v", tmplLabels)
			}
			sel, found, _ := unstructured.NestedStringMap(o, "spec", "selector", "matchLabels")
			if found != tc.selector || (found && !labels.SelectorFromSet(sel).Matches(labels.Set(tmplLabels))) {
				t.Errorf("selector %v (set %v) vs template labels %v", sel, found, tmplLabels)
			}
			if kind, _, _ := unstructured.NestedString(o, "spec", "template", "spec", "infrastructureRef", "kind"); kind != tc.infra {
				t.Errorf("infrastructureRef kind %q, want %q", kind, tc.infra)
			}
			if v, _, _ := unstructured.NestedString(o, "spec", "template", "spec", "version"); len(v) < 2 || v[0] != 'v' {
				t.Errorf("version %q, want a v-prefixed one", v)
			}
			if s, _, _ := unstructured.NestedString(o, "spec", "template", "spec", "bootstrap", "dataSecretName"); s == "" {
				t.Error("no bootstrap.dataSecretName")
			}
			strategy, _, _ := unstructured.NestedString(o, "spec", "rollout", "strategy", "type")
			if (strategy == "RollingUpdate") != tc.rollout {
				t.Errorf("rollout strategy %q", strategy)
			}
			if _, err := ResourceOf(tc.obj); err != nil {
				t.Error(err)
			}
		})
	}
}
