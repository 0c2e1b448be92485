package framework

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const blockKey = "example.com/block"

func newCompositeRunner(t *testing.T) (*Runner, context.Context) {
	t.Helper()
	t.Cleanup(func() {
		if err := ApplyFeatureGates("CompositePodGroup=false,TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	return newRunner(t, cycleGates+",CompositePodGroup=true")
}

// blockNode is a node in a rack of a block.
func blockNode(name, block, rack, cpu string) *v1.Node {
	return builder.Node(name).CPU(cpu).Label(blockKey, block).Label(rackKey, rack).Obj()
}

// twoRackJob is a CompositePodGroup "job" with topology block, all (2)
// of its children required, each child a PodGroup with topology rack and
// minCount = members.
func twoRackJob(n int) *GroupTree {
	job := builder.CompositePodGroup(ns, "job").MinGroupCount(2).TopologyKey(blockKey).Obj()
	tree := &GroupTree{Composite: job}
	for _, name := range []string{"worker-b", "worker-a"} { // ordered by name by the cycle
		pg := builder.PodGroup(ns, name).MinCount(int32(n)).TopologyKey(rackKey).Parent("job").Obj()
		tree.Children = append(tree.Children, &GroupTree{PodGroup: pg, Members: members(name, n)})
	}
	return tree
}

func TestSchedulePodGroupTree(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*v1.Node
		// chosen is the block; "" when none fits.
		chosen string
		// on are the members' nodes, worker-a's then worker-b's.
		on      []string
		message string
		// blocks are each block placement's verdict, in name order.
		blocks []string
	}{{
		// b1's second rack cannot hold a child: the block fails
		// minGroupCount; b2 holds one child per rack.
		name: "one block holds both racks' worth",
		nodes: []*v1.Node{blockNode("n1", "b1", "r1", "2"), blockNode("n2", "b1", "r2", "1"),
			blockNode("n3", "b2", "r3", "2"), blockNode("n4", "b2", "r4", "2")},
		chosen: "b2",
		on:     []string{"n3", "n3", "n4", "n4"},
		blocks: []string{"minGroupCount", "feasible"},
	}, {
		// Both children fit one rack each only if the first leaves the
		// second rack alone: the child tried first takes r1 (first by
		// name), the second r2.
		name:   "children take racks in turn",
		nodes:  []*v1.Node{blockNode("n1", "b1", "r1", "2"), blockNode("n2", "b1", "r2", "2")},
		chosen: "b1",
		on:     []string{"n1", "n1", "n2", "n2"},
		blocks: []string{"feasible"},
	}, {
		name:    "no block holds both",
		nodes:   []*v1.Node{blockNode("n1", "b1", "r1", "2"), blockNode("n2", "b2", "r2", "2")},
		message: "0/2 placements are available",
		blocks:  []string{"minGroupCount", "minGroupCount"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newCompositeRunner(t)
			s := r.Snapshot()
			var names []string
			for _, n := range tc.nodes {
				snapshottest.Load(t, s, n)
				names = append(names, n.Name)
			}
			tree := twoRackJob(2)
			loadTree(t, s, tree)
			for _, keep := range []bool{false, true} {
				res, err := r.SchedulePodGroupTree(ctx, tree, names, keep)
				if err != nil {
					t.Fatalf("keep=%v: %v", keep, err)
				}
				var verdicts []string
				for _, pl := range res.Placements {
					v := "feasible"
					if !pl.Feasible() {
						v = pl.Message
						if strings.Contains(v, "minCount") {
							v = "minGroupCount"
						}
					}
					verdicts = append(verdicts, v)
				}
				if !slices.Equal(verdicts, tc.blocks) {
					t.Errorf("keep=%v: block verdicts %q, want %q", keep, verdicts, tc.blocks)
				}
				best := res.Best()
				if tc.chosen == "" {
					if best != nil || !strings.Contains(res.Message, tc.message) {
						t.Fatalf("keep=%v: chose %+v (%q), want none: %q", keep, best, res.Message, tc.message)
					}
					continue
				}
				if best == nil || best.Name != tc.chosen {
					t.Fatalf("keep=%v: chose %+v (%s), want %s", keep, best, res.Message, tc.chosen)
				}
				if got := memberNodes(best); !slices.Equal(got, tc.on) {
					t.Errorf("keep=%v: members on %v, want %v", keep, got, tc.on)
				}
				pods := tree.Pods()
				for i, p := range pods {
					placed, ok := s.PlacedPod(p.Namespace, p.Name)
					if keep != (ok && placed.Spec.NodeName == tc.on[i]) {
						t.Errorf("keep=%v: member %s placed %v on %v", keep, p.Name, ok, placed)
					}
				}
			}
		})
	}
}

func TestGroupTreeRejectsMalformed(t *testing.T) {
	r, ctx := newCompositeRunner(t)
	pg := builder.PodGroup(ns, "g").MinCount(1).Obj()
	job := builder.CompositePodGroup(ns, "job").Obj()
	for name, tree := range map[string]*GroupTree{
		"neither":          {},
		"both":             {PodGroup: pg, Composite: job},
		"composite member": {Composite: job, Members: members("g", 1)},
		"leaf children":    {PodGroup: pg, Children: []*GroupTree{{PodGroup: pg}}},
		"bad child":        {Composite: job, Children: []*GroupTree{{}}},
	} {
		if _, err := r.SchedulePodGroupTree(ctx, tree, nil, false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// loadTree puts a composite tree's objects and members in the snapshot.
func loadTree(t *testing.T, s *snapshot.Snapshot, tree *GroupTree) {
	t.Helper()
	snapshottest.Load(t, s, tree.Composite)
	for _, c := range tree.Children {
		snapshottest.Load(t, s, c.PodGroup)
		for _, m := range c.Members {
			snapshottest.Load(t, s, m)
		}
	}
}
