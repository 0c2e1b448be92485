package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const blockLabel = "example.com/block"

// nominatedInLog is, per pod of namespace ns, the last node the
// autoscaler nominated it for (its log): the autoscaler's plan for it.
// The pods' nominatedNodeName alone is not: the scheduler writes it too,
// for the node it is binding to.
func nominatedInLog(log, ns string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"Nominated the pod for the node the plan placed it on"`) {
			continue
		}
		pod, node := logValue(line, "pod"), logValue(line, "node")
		if name, ok := strings.CutPrefix(pod, ns+"/"); ok && node != "" {
			out[name] = node
		}
	}
	return out
}

// logValue is the quoted value of key in a klog text line.
func logValue(line, key string) string {
	_, rest, ok := strings.Cut(line, " "+key+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// Two levels (issue 38): a CompositePodGroup "job" with topology block
// and two child PodGroups with topology rack, four one-GPU members each
// (a rack must hold 4 GPUs for a child, a block 8 for the job). Groups
// per rack with fixed labels, 2-GPU nodes: b1-r1 (max 3), b1-r2 (max 2),
// b2-r3 (max 2), b2-r4 (max 2). Existing, partly used nodes: one in r1
// with a GPU held (1 free: r1 holds 1 + 2 × 2 = 5), one in r4 with both
// held (r4 holds 0 + 1 × 2 = 2, too few for a child): only block b1 can
// hold both racks' worth. The autoscaler plans the tree with the
// scheduler's own cycle, level by level; the real scheduler (the same
// gates) binds every child in the rack the autoscaler planned it in (its
// members' nominations), uses every node added, and no node is added
// outside b1. Member by member the binding is printed beside the plan
// but not required to match: the scheduler clears a member's nomination
// after each failed attempt of the group (v1.37.2, clearNominatedNode,
// while the new nodes' devices are not yet published), and when its
// successful attempt comes before the autoscaler's next pass writes them
// again, it picks nodes within the rack by its own scores (ties at
// random).
//
// Members ask for 16 CPUs so that the racks' PlacementScore differs
// (NodeResourcesFit's MostAllocated over a placement: r2's two nodes
// would be 50 % used, r1's three 34 %): worker-a, the first child, takes
// r2 and worker-b r1. With equal scores the scheduler picks a placement
// at random (findBestPlacement), which no plan can foretell member by
// member (docs/gangs.md).
func TestGangTwoLevels(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	groups := map[string]kwok.NodeGroupConfig{}
	var cfg kwok.Config
	for _, g := range []struct {
		block, rack string
		max         int
	}{{"b1", "r1", 3}, {"b1", "r2", 2}, {"b2", "r3", 2}, {"b2", "r4", 2}} {
		ng := s.gpuGroup(g.block+"-"+g.rack, g.max, 2)
		ng.Topology = map[string]string{blockLabel: g.block, rackLabel: g.rack}
		// Devices come a few passes after a node registers, so the
		// members are nominated for it before the scheduler can bind.
		ng.DriverDelay = metav1.Duration{Duration: 6 * time.Second}
		groups[g.rack] = ng
		cfg.NodeGroups = append(cfg.NodeGroups, ng)
	}
	a := s.c.StartAutoscaler(t, cfg)
	tmpl := s.gpuTemplate(t)
	for _, h := range []struct{ name, rack string }{{"hold-r1", "r1"}, {"hold-r4-0", "r4"}, {"hold-r4-1", "r4"}} {
		s.c.Create(s.ctx, t, s.pod(h.name).CPU("1").NodeSelector(rackLabel, h.rack).ClaimFromTemplate("gpu", tmpl).Obj())
	}
	for _, h := range []string{"hold-r1", "hold-r4-0", "hold-r4-1"} {
		s.podNode(t, h)
	}
	if n := s.groupSize(t, groups["r4"].Name); n != 1 {
		t.Fatalf("r4 has %d nodes for its two holds, want 1", n)
	}
	before := map[string]int{}
	for r, g := range groups {
		before[r] = s.groupSize(t, g.Name)
	}

	s.c.Create(s.ctx, t, builder.CompositePodGroup(s.ns, "job").MinGroupCount(2).TopologyKey(blockLabel).Workload("job", "job").Obj(),
		builder.ClaimTemplate(s.ns, "member-gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	var members []string
	for _, w := range []string{"worker-a", "worker-b"} {
		s.c.Create(s.ctx, t, builder.PodGroup(s.ns, w).MinCount(4).TopologyKey(rackLabel).Parent("job").Workload("job", w).Obj())
		for i := range 4 {
			name := fmt.Sprintf("%s-%d", w, i)
			members = append(members, name)
			s.c.Create(s.ctx, t, s.pod(name).CPU("16").PodGroup(w).ClaimFromTemplate("gpu", "member-gpu").Obj())
		}
	}
	framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members and 3 holds bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 11, seen, err
	})

	nodes, err := s.c.Client.CoreV1().Nodes().List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blockOf, rackOf := map[string]string{}, map[string]string{}
	for _, n := range nodes.Items {
		blockOf[n.Name], rackOf[n.Name] = n.Labels[blockLabel], n.Labels[rackLabel]
	}
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]string{}
	for _, p := range pods.Items {
		bound[p.Name] = p.Spec.NodeName
	}
	nominated := nominatedInLog(a.Log(), s.ns)
	var lines []string
	racks, plannedRacks := map[string]map[string]bool{}, map[string]map[string]bool{}
	add := func(m map[string]map[string]bool, w, rack string) {
		if m[w] == nil {
			m[w] = map[string]bool{}
		}
		m[w][rack] = true
	}
	used := map[string]bool{}
	for _, node := range bound {
		used[node] = true
	}
	moved := 0
	for _, m := range members {
		node := bound[m]
		lines = append(lines, fmt.Sprintf("%-10s planned %-40s bound %-40s %s/%s", m, nominated[m], node, blockOf[node], rackOf[node]))
		if nominated[m] == "" {
			t.Errorf("%s: never nominated", m)
		}
		if nominated[m] != node {
			moved++
		}
		if blockOf[node] != "b1" {
			t.Errorf("%s: bound in block %q, want b1", m, blockOf[node])
		}
		w := m[:strings.LastIndex(m, "-")]
		add(racks, w, rackOf[node])
		add(plannedRacks, w, rackOf[nominated[m]])
	}
	sort.Strings(lines)
	t.Logf("per member, the autoscaler's plan and the scheduler's binding (%d bound on another node of the planned rack):\n%s", moved, strings.Join(lines, "\n"))
	// Every level as planned: the block, each child's rack.
	want := map[string]map[string]bool{"worker-a": {"r2": true}, "worker-b": {"r1": true}}
	if !reflect.DeepEqual(racks, want) || !reflect.DeepEqual(plannedRacks, want) {
		t.Errorf("racks per child: bound %v, planned %v; want worker-a in r2 (the higher placement score) and worker-b in r1", racks, plannedRacks)
	}
	// Every node of the block's racks holds a pod of the test: the
	// autoscaler added none the scheduler left idle.
	for _, r := range []string{"r1", "r2"} {
		list, err := s.groupNodes(s.ctx, groups[r].Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range list {
			if !used[n.Name] {
				t.Errorf("node %s of rack %s holds none of the test's pods", n.Name, r)
			}
		}
	}
	for _, r := range []string{"r3", "r4"} {
		if n := s.groupSize(t, groups[r].Name); n != before[r] {
			t.Errorf("group %s grew from %d to %d nodes: outside block b1", groups[r].Name, before[r], n)
		}
	}
	if !plannedByCycle(a.Log()) {
		t.Error("the job was not planned with the pod group cycle")
	}
}
