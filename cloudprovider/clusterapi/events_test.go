package clusterapi

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// Bad input is told on the object, once per distinct problem, and again
// when it comes back after a fix.
func TestEvents(t *testing.T) {
	rec := record.NewFakeRecorder(20)
	resources := []*metav1.APIResourceList{capiResources("v1beta2", true)}
	e, err := tryEnvOpts(t, func(o *Options) { o.Events = rec }, nil, resources,
		md("bad").ann(newKeys(DefaultGroup).minSize, "4", newKeys(DefaultGroup).maxSize, "2"),
		md("gpu").size(0, 3).ann(keyCPU, "8", keyMemory, "8Gi", AnnotationDRATemplate, "missing"),
		md("cpu").size(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	g := e.group(gpuGroup)
	for range 3 {
		if err := e.p.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := g.TemplateNodeInfo(); err == nil {
			t.Fatal("a template with a missing ConfigMap")
		}
	}
	want := []string{
		"Warning InvalidNodeGroup Left out of autoscaling: annotation cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size=2 is below",
		"Warning InvalidNodeTemplate No template for scale from zero: MachineDeployment team/gpu: annotation autoscaling.dra-autoscaler.io/dra-template: ConfigMap team/missing",
	}
	check := func(want []string) {
		t.Helper()
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if len(got) != len(want) {
			t.Fatalf("events %q, want %d", got, len(want))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("event %q, want %q...", got[i], want[i])
			}
		}
	}
	check(want)
	// Fixed, then broken again: told again.
	e.write(e.gvr(kindMachineDeployment), md("bad").size(0, 2))
	e.refresh()
	check(nil)
	if ids := ids(e.p.NodeGroups()); !slices.Contains(ids, "MachineDeployment/team/bad") {
		t.Fatalf("fixed group missing: %v", ids)
	}
	e.write(e.gvr(kindMachineDeployment), md("bad").ann(newKeys(DefaultGroup).minSize, "4", newKeys(DefaultGroup).maxSize, "2"))
	e.refresh()
	check(want[:1])
}
