package framework

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// TestFirstFitAgrees checks that filtering in chunks with an early stop
// answers as the full pass does: the same node for SchedulePodFirstFit as
// for SchedulePod, the same verdicts (a prefix) for FilterUntil as for
// RunFilters, PreFilter's node set honoured in every chunk.
func TestFirstFitAgrees(t *testing.T) {
	// 40 nodes, every third with room for the pod: past the first chunks.
	var nodes []string
	var objs []any
	for i := range 40 {
		name := fmt.Sprintf("n%02d", i)
		cpu := "1"
		if i%3 == 2 {
			cpu = "4"
		}
		nodes = append(nodes, name)
		objs = append(objs, builder.Node(name).CPU(cpu).Obj())
	}
	pinned := builder.Pod(ns, "pinned").CPU("2").Obj()
	pinned.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: builder.NodeNameSelector("n35")}}
	reversed := slices.Clone(nodes)
	slices.Reverse(reversed)
	tests := []struct {
		name       string
		pod        *v1.Pod
		candidates []string
		enough     int
		wantNode   string
		// FilterUntil's verdicts, how many fit: whole chunks of 8, 16, 32.
		wantFiltered, wantFits int
	}{
		{"first fit in order", builder.Pod(ns, "p").CPU("2").Obj(), nodes, 1, "n02", 8, 2},
		{"first fit in reverse", builder.Pod(ns, "p").CPU("2").Obj(), reversed, 3, "n38", 8, 3},
		{"enough past a chunk", builder.Pod(ns, "p").CPU("2").Obj(), nodes, 8, "n02", 24, 8},
		{"all when enough is 0", builder.Pod(ns, "p").CPU("2").Obj(), nodes, 0, "n02", 40, 13},
		{"fits nowhere", builder.Pod(ns, "p").CPU("8").Obj(), nodes, 1, "", 40, 0},
		{"PreFilter's node set", pinned, nodes, 1, "n35", 40, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t, "")
			snapshottest.Load(t, r.Snapshot(), objs...)
			full, err := r.RunFilters(ctx, tc.pod, tc.candidates)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.FilterUntil(ctx, tc.pod, tc.candidates, tc.enough)
			if err != nil {
				t.Fatal(err)
			}
			fits := 0
			for i, res := range got {
				if res != full[i] {
					t.Errorf("verdict %d: %+v, RunFilters says %+v", i, res, full[i])
				}
				if res.Fits {
					fits++
				}
			}
			if fits != tc.wantFits || len(got) != tc.wantFiltered {
				t.Errorf("FilterUntil found %d fits in %d verdicts, want %d in %d", fits, len(got), tc.wantFits, tc.wantFiltered)
			}
			want, err := r.SchedulePod(ctx, tc.pod, tc.candidates)
			if err != nil {
				t.Fatal(err)
			}
			if want.Node != tc.wantNode {
				t.Fatalf("SchedulePod chose %q, want %q", want.Node, tc.wantNode)
			}
			if want.Node != "" {
				if err := r.Snapshot().RemovePod(tc.pod.Namespace, tc.pod.Name); err != nil {
					t.Fatal(err)
				}
			}
			first, err := r.SchedulePodFirstFit(ctx, tc.pod, tc.candidates)
			if err != nil {
				t.Fatal(err)
			}
			if first.Node != want.Node {
				t.Errorf("SchedulePodFirstFit chose %q, SchedulePod %q", first.Node, want.Node)
			}
			if _, ok := r.Snapshot().PlacedPod(tc.pod.Namespace, tc.pod.Name); ok != (want.Node != "") {
				t.Errorf("pod placed in the snapshot: %v, want %v", ok, want.Node != "")
			}
		})
	}
}
