package estimator

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Groups that differ only in a label nothing selects on share one
// estimate (the same result under their own names, no framework call);
// a label a pod selects on, a well-known label or another cap keeps them
// apart. Either way every result is the one estimating alone gives.
func TestEstimateGroupsShareIdenticalTemplates(t *testing.T) {
	const groupLabel = "example.com/group"
	groups := []TemplateGroup{
		{Name: "a", Template: gpuTemplate(8, map[string]string{groupLabel: "a"})},
		{Name: "b", Template: gpuTemplate(8, map[string]string{groupLabel: "b"})},
		{Name: "zonal", Template: gpuTemplate(8, map[string]string{groupLabel: "c", v1.LabelTopologyZone: "z1"})},
		{Name: "capped", Template: gpuTemplate(8, map[string]string{groupLabel: "d"}), MaxNodes: 2},
		{Name: "e", Template: gpuTemplate(8, map[string]string{groupLabel: "e"})},
	}
	pods, objs := shapedPods(60, 6)
	selecting := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		selecting[i] = p.DeepCopy()
		selecting[i].Spec.NodeSelector = map[string]string{groupLabel: "b"}
	}
	huge := append(slices.Clip(pods), builder.Pod(ns, "huge-0").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj(),
		builder.Pod(ns, "huge-1").CPU("1000").OwnedBy("apps/v1", "ReplicaSet", "huge").Obj())
	// Running pods: one whose node selector names the label (read when it
	// was placed, never again), one whose anti-affinity spreads by it.
	selector := builder.Pod(ns, "selector").CPU("1").NodeSelector(groupLabel, "a").Node("node-0").Obj()
	spreading := builder.Pod(ns, "spreading").CPU("1").Label("app", "x").Node("node-1").Obj()
	spreading.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: groupLabel, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}}}
	tests := []struct {
		name       string
		pods       []*v1.Pod
		running    []any
		wantShared []string // groups that must take another's estimate
		kept       int      // nodes of group a the snapshot holds already
	}{
		{"a name label nobody reads", pods, nil, []string{"b", "e"}, 0},
		{"a label the pods select on", selecting, nil, nil, 0},
		{"pods no group fits", huge, nil, []string{"b", "e"}, 0},
		{"a label a running pod selected its node by", pods, []any{selector}, []string{"b", "e"}, 0},
		{"a label a running pod's anti-affinity reads", pods, []any{spreading}, nil, 0},
		// a's new nodes are named from a-template-3 on, the others' from 0.
		{"earlier nodes of the first group", pods, nil, []string{"b", "e"}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := bigCluster(t, 4, 2)
			snapshottest.Load(t, r.Snapshot(), objs...)
			snapshottest.Load(t, r.Snapshot(), tc.running...)
			for i := range tc.kept {
				if err := template.AddInstance(ctx, r, groups[0].Template, fmt.Sprintf("a-template-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			alone, err := New(r, Options{DisableSharing: true}).EstimateGroups(ctx, tc.pods, groups)
			if err != nil {
				t.Fatal(err)
			}
			got, err := New(r, Options{}).EstimateGroups(ctx, tc.pods, groups)
			if err != nil {
				t.Fatal(err)
			}
			var shared []string
			for i, g := range groups {
				if !reflect.DeepEqual(outcomeOf(got[i]), outcomeOf(alone[i])) {
					t.Errorf("group %s: shared estimate %+v, alone %+v", g.Name, outcomeOf(got[i]), outcomeOf(alone[i]))
				}
				// The dropped nodes, named after the group, are what
				// Carry checks; the verdicts themselves name none.
				if !slices.Equal(got[i].droppedNodes, alone[i].droppedNodes) {
					t.Errorf("group %s: shared estimate dropped nodes %q, alone %q", g.Name, got[i].droppedNodes, alone[i].droppedNodes)
				}
				for u := range got[i].Unplaced.All() {
					if u.Result.Plugin != "" && len(got[i].droppedNodes) == 0 {
						t.Errorf("group %s: pod %s has a verdict, but no dropped node is named", g.Name, u.Pod.Name)
					}
				}
				if got[i].FrameworkCalls == 0 && got[i].MemoHits == 0 && alone[i].FrameworkCalls > 0 {
					shared = append(shared, g.Name)
				}
			}
			if !reflect.DeepEqual(shared, tc.wantShared) {
				t.Errorf("shared %v, want %v", shared, tc.wantShared)
			}
		})
	}
}

// The label keys the cluster's claims select by are kept while the
// snapshot's shared generation holds, and follow it through forks and
// reverts: a claim allocated by label adds its key, one bound to a node
// by name adds none and keeps the kept keys.
func TestClusterReads(t *testing.T) {
	r, _ := newRunner(t)
	s := r.Snapshot()
	snapshottest.Load(t, s, classes()...)
	snapshottest.Load(t, s, builder.Node("n1").CPU("4").Obj())
	byLabel := func(name, key string) *resourceapi.ResourceClaim {
		c := builder.Claim(ns, name).Request(builder.Request("gpu", "gpu")).Obj()
		c.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: v1.NodeSelectorOpIn, Values: []string{"x"}}}}}}}
		return c
	}
	var cache clusterReads
	keys := func() []string {
		t.Helper()
		got, ok, err := cache.of(s)
		if err != nil || !ok {
			t.Fatalf("of: %v %v", ok, err)
		}
		return slices.Sorted(slices.Values(got))
	}
	set := func(c *resourceapi.ResourceClaim) {
		t.Helper()
		if err := s.SetResourceClaim(c); err != nil {
			t.Fatal(err)
		}
	}
	set(byLabel("zoned", "example.com/zone"))
	if got := keys(); !slices.Equal(got, []string{"example.com/zone"}) {
		t.Fatalf("keys %v", got)
	}
	s.Fork()
	set(builder.Claim(ns, "local").Request(builder.Request("gpu", "gpu")).Allocated("n1").Obj())
	set(byLabel("racked", "example.com/rack"))
	if got := keys(); !slices.Equal(got, []string{"example.com/rack", "example.com/zone"}) {
		t.Errorf("after a claim allocated by label: keys %v", got)
	}
	if err := s.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"example.com/zone"}) {
		t.Errorf("after the revert: keys %v", got)
	}
}
