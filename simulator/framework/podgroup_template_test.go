package framework_test

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Hypothetical nodes from node-group templates take part in the cycle as
// existing nodes do: the generator files them under their template's rack,
// and a placement mixes an existing, partly used node with new ones. Here
// rack-a (one existing node with 1 CPU left, one new node) places 3 of 4
// members, rack-c (two new nodes) all 4; both reach minCount 3, and the
// scores pick rack-c: PodGroupPodsCount 75 vs 100, NodeResourcesFit 50
// each (both racks' CPU full, memory ~0).
func TestSchedulePodGroupWithTemplateNodes(t *testing.T) {
	const ns, rack = "default", "example.com/rack"
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{FeatureGates: "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	pg := builder.PodGroup(ns, "g").MinCount(3).TopologyKey(rack).Obj()
	snapshottest.Load(t, s, builder.Node("a1").CPU("2").Label(rack, "rack-a").Obj(),
		builder.Pod(ns, "filler").CPU("1").Node("a1").Obj(), pg)
	templates := map[string]*cloudprovider.NodeTemplate{
		"a": {Node: builder.Node("tmpl-a").CPU("2").Label(rack, "rack-a").Obj()},
		"c": {Node: builder.Node("tmpl-c").CPU("2").Label(rack, "rack-c").Obj()},
	}
	nodes := []string{"a1"}
	for _, inst := range []struct{ group, name string }{{"a", "new-a-0"}, {"c", "new-c-0"}, {"c", "new-c-1"}} {
		if err := template.AddInstance(ctx, r, templates[inst.group], inst.name); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, inst.name)
	}
	var members []*v1.Pod
	for i := range 4 {
		p := builder.Pod(ns, fmt.Sprintf("g-%d", i)).CPU("1").PodGroup("g").Obj()
		snapshottest.Load(t, s, p)
		members = append(members, p)
	}

	res, err := r.SchedulePodGroup(ctx, pg, members, nodes, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		nodes, members []string
		score          int64
	}{
		"rack-a": {[]string{"a1", "new-a-0"}, []string{"a1", "new-a-0", "new-a-0", ""}, 125},
		"rack-c": {[]string{"new-c-0", "new-c-1"}, []string{"new-c-0", "new-c-0", "new-c-1", "new-c-1"}, 150},
	}
	if len(res.Placements) != len(want) {
		t.Fatalf("placements %+v, want rack-a and rack-c", res.Placements)
	}
	for _, p := range res.Placements {
		w := want[p.Name]
		var got []string
		for _, m := range p.Members {
			node := ""
			if m != nil {
				node = m.Node
			}
			got = append(got, node)
		}
		if !p.Feasible() || !slices.Equal(p.Nodes, w.nodes) || !slices.Equal(got, w.members) || p.Score != w.score {
			t.Errorf("placement %q: feasible %v (%s), nodes %v, members on %v, score %d; want feasible, %v, %v, %d",
				p.Name, p.Feasible(), p.Message, p.Nodes, got, p.Score, w.nodes, w.members, w.score)
		}
	}
	if best := res.Best(); best == nil || best.Name != "rack-c" {
		t.Errorf("chose %+v, want rack-c", best)
	}
}
