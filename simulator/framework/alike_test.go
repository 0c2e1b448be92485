package framework

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// cpuKey is a test's idea of alike placements: each node's free CPU and
// rack, racks numbered by first appearance. lie makes every placement
// alike, as a wrong key would.
func cpuKey(r *Runner, lie bool) func(t *GroupTree, nodes []string) string {
	return func(t *GroupTree, nodes []string) string {
		if lie {
			return "all alike"
		}
		var b strings.Builder
		racks := map[string]int{}
		for _, name := range nodes {
			ni, err := r.Snapshot().Get(name)
			if err != nil {
				return ""
			}
			rack := ni.Node().Labels[rackKey]
			if _, ok := racks[rack]; !ok {
				racks[rack] = len(racks)
			}
			free := ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU()
			fmt.Fprintf(&b, "%d/%d ", free, racks[rack])
		}
		return b.String()
	}
}

// verdicts flattens a result: each placement's name, verdict and members'
// nodes, children included.
func verdicts(res *PodGroupResult) []string {
	var out []string
	for i := range res.Placements {
		p := &res.Placements[i]
		out = append(out, fmt.Sprintf("%s %v %d %v", p.Name, p.Feasible(), p.Score, memberNodes(p)))
		for _, c := range p.Children {
			if c != nil {
				out = append(out, verdicts(c)...)
			}
		}
	}
	return append(out, fmt.Sprintf("chosen %d", res.Chosen))
}

func TestAlikePlacements(t *testing.T) {
	// Three blocks of two racks of two 2-CPU nodes, alike; b0's second
	// rack is smaller (a different kind).
	var nodes []*v1.Node
	for b := range 4 {
		for r := range 2 {
			for n := range 2 {
				cpu := "2"
				if b == 0 && r == 1 {
					cpu = "1"
				}
				nodes = append(nodes, blockNode(fmt.Sprintf("n-b%d-r%d-%d", b, r, n), fmt.Sprintf("b%d", b), fmt.Sprintf("b%d-r%d", b, r), cpu))
			}
		}
	}
	tests := []struct {
		name string
		lie  bool
		// copies are how many placements verify mode compared (0: any);
		// found how many it found wrong (-1: some).
		copies, found int
	}{
		// Blocks b2 and b3 are copies of b1; in every block but b0 the
		// second rack tried for the first child is a copy of the first.
		{name: "alike", copies: 5},
		// Without verify, the wrong copy chosen fails when kept: the
		// cycle runs again without copies.
		{name: "a wrong key is caught", lie: true, found: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newCompositeRunner(t)
			s := r.Snapshot()
			var names []string
			for _, n := range nodes {
				snapshottest.Load(t, s, n)
				names = append(names, n.Name)
			}
			tree := twoRackJob(2)
			loadTree(t, s, tree)
			plain, err := r.SchedulePodGroupTree(ctx, tree, names, false)
			if err != nil {
				t.Fatal(err)
			}
			want := verdicts(plain)
			for _, verify := range []bool{false, true} {
				keep := tc.lie && !verify
				checked, found := 0, 0
				alike := &Alike{Key: cpuKey(r, tc.lie), Verify: verify, Checked: func() { checked++ },
					Found: func(group, placement, got, want string) { found++ }}
				s.Fork()
				res, err := r.SchedulePodGroupTreeAlike(ctx, tree, names, keep, alike)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Revert(); err != nil {
					t.Fatal(err)
				}
				if keep {
					if found != 1 || res.Best() == nil || res.Best().Name != plain.Best().Name {
						t.Errorf("kept a wrong copy: found %d, chose %+v, want %s", found, res.Best(), plain.Best().Name)
					}
					continue
				}
				if got := verdicts(res); !slices.Equal(got, want) {
					t.Errorf("verify=%v: got\n%s\nwant\n%s", verify, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if verify && ((tc.copies > 0 && checked != tc.copies) || (tc.found >= 0 && found != tc.found) || (tc.found < 0 && found == 0)) {
					t.Errorf("verify: %d copies checked, %d found wrong; want %d, %d", checked, found, tc.copies, tc.found)
				}
			}
		})
	}
}

// Rejections kept by a member class are read back instead of filtering
// again, across cycles while the nodes' generations hold; verify filters
// anyway and reports a remembered verdict the plugins do not give.
func TestRejections(t *testing.T) {
	var nodes []*v1.Node
	for b := range 2 {
		for r := range 2 {
			for n := range 2 {
				nodes = append(nodes, blockNode(fmt.Sprintf("n-b%d-r%d-%d", b, r, n), fmt.Sprintf("b%d", b), fmt.Sprintf("b%d-r%d", b, r), "1"))
			}
		}
	}
	for _, tc := range []struct {
		name string
		// lie seeds the memo with "does not fit" on every node.
		lie bool
		// keyed keeps verdicts by a key too (the CPU requested on the
		// node: all else alike to these members), lies by key.
		keyed bool
	}{{name: "honest"}, {name: "a lie is caught", lie: true},
		{name: "keyed", keyed: true}, {name: "a keyed lie is caught", lie: true, keyed: true}} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newCompositeRunner(t)
			s := r.Snapshot()
			var names []string
			for _, n := range nodes {
				snapshottest.Load(t, s, n)
				names = append(names, n.Name)
			}
			// A node already full: its generation holds across cycles.
			snapshottest.Load(t, s, builder.Pod(ns, "other").CPU("1").Node(names[0]).Obj())
			tree := twoRackJob(2)
			loadTree(t, s, tree)
			plain, err := r.SchedulePodGroupTree(ctx, tree, names, false)
			if err != nil {
				t.Fatal(err)
			}
			want := verdicts(plain)
			memo := NewRejections()
			if tc.keyed {
				memo = NewKeyedRejections(func(n string) string {
					ni, err := s.NodeInfos().Get(n)
					if err != nil {
						return ""
					}
					return strconv.FormatInt(ni.GetRequested().GetMilliCPU(), 10)
				})
			}
			if tc.lie {
				for _, n := range names {
					if tc.keyed {
						memo.byKey[keyedRejection{key: memo.keyOf(n), class: "c"}] = NodeResult{Plugin: "Lie", Message: "no"}
						continue
					}
					memo.no[rejection{node: n, gen: s.NodeGen(n), class: "c"}] = NodeResult{Node: n, Plugin: "Lie", Message: "no"}
				}
			}
			// Twice without verify (the second reads what the first
			// kept), then with.
			for i, verify := range []bool{false, false, true} {
				checked, found := 0, 0
				alike := &Alike{Key: func(*GroupTree, []string) string { return "" }, Verify: verify,
					Checked: func() { checked++ }, Found: func(group, placement, got, want string) { found++ },
					Class: func(*v1.Pod) string { return "c" }, Rejected: memo}
				res, err := r.SchedulePodGroupTreeAlike(ctx, tree, names, false, alike)
				if err != nil {
					t.Fatal(err)
				}
				got := verdicts(res)
				switch {
				case tc.lie && !verify:
					if res.Best() != nil {
						t.Errorf("run %d: the memo's lie was not read: chose %s", i, res.Best().Name)
					}
				case !slices.Equal(got, want):
					t.Errorf("run %d: got\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if i == 0 && !tc.lie && (len(memo.no) == 0 || tc.keyed && len(memo.byKey) == 0) {
					t.Error("no rejection kept")
				}
				if verify && (checked == 0 || (found > 0) != tc.lie) {
					t.Errorf("verify: %d checked, %d found wrong (lie %v)", checked, found, tc.lie)
				}
			}
		})
	}
}

// A rack that differs from another only by a node turning every member
// down is alike to it when Idle says so: the key leaves the node out, the
// copy maps the other nodes in order, and verify finds the copy right.
func TestAlikeIdleNodes(t *testing.T) {
	r, ctx := newCompositeRunner(t)
	s := r.Snapshot()
	var names []string
	for _, n := range []struct{ name, rack string }{{"n0", "r0"}, {"n1", "r0"}, {"n2", "r0"}, {"n3", "r1"}, {"n4", "r1"}} {
		snapshottest.Load(t, s, blockNode(n.name, "b0", n.rack, "1"))
		names = append(names, n.name)
	}
	snapshottest.Load(t, s, builder.Pod(ns, "other").CPU("1").Node("n0").Obj()) // full
	pg := builder.PodGroup(ns, "train").MinCount(2).TopologyKey(rackKey).Obj()
	tree := &GroupTree{PodGroup: pg, Members: members("train", 2)}
	snapshottest.Load(t, s, pg)
	for _, m := range tree.Members {
		snapshottest.Load(t, s, m)
	}
	plain, err := r.SchedulePodGroupTree(ctx, tree, names, false)
	if err != nil {
		t.Fatal(err)
	}
	memo := NewRejections()
	memo.no[rejection{node: "n0", gen: s.NodeGen("n0"), class: "c"}] = NodeResult{Node: "n0", Code: fwk.Unschedulable, Plugin: "NodeResourcesFit", Message: "Insufficient cpu"}
	idle := func(_ *GroupTree, node string) bool { return memo.Has(node, s.NodeGen(node), "c") }
	honest := cpuKey(r, false)
	key := func(t *GroupTree, nodes []string) string {
		var busy []string
		for _, n := range nodes {
			if !idle(t, n) {
				busy = append(busy, n)
			}
		}
		return honest(t, busy)
	}
	for _, verify := range []bool{false, true} {
		checked, found := 0, 0
		alike := &Alike{Key: key, Verify: verify, Checked: func() { checked++ }, Found: func(group, placement, got, want string) { found++ },
			Class: func(*v1.Pod) string { return "c" }, Rejected: memo, Idle: idle}
		res, err := r.SchedulePodGroupTreeAlike(ctx, tree, names, false, alike)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := verdicts(res), verdicts(plain); !slices.Equal(got, want) {
			t.Errorf("verify=%v: got\n%s\nwant\n%s", verify, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !verify && alike.copies != 1 {
			t.Errorf("%d placements copied, want 1 (r1 from r0)", alike.copies)
		}
		if verify && (checked == 0 || found != 0) {
			t.Errorf("verify: %d checked, %d found wrong", checked, found)
		}
	}
}
