package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const blockLabel = "example.com/block"

// nominations records, until stop, the last node each pod of the test was
// nominated for while pending: the autoscaler's plan for it.
func (s *scenario) nominations(t *testing.T) (get func() map[string]string, stop func()) {
	var mu sync.Mutex
	seen := map[string]string{}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				mu.Lock()
				for _, p := range pods.Items {
					if p.Spec.NodeName == "" && p.Status.NominatedNodeName != "" {
						seen[p.Name] = p.Status.NominatedNodeName
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]string, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}, stop
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
// gates) binds every member where the autoscaler planned it (its
// nomination), and no node is added outside b1.
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

	planned, stop := s.nominations(t)
	s.c.Create(s.ctx, t, builder.CompositePodGroup(s.ns, "job").MinGroupCount(2).TopologyKey(blockLabel).Workload("job", "job").Obj(),
		builder.ClaimTemplate(s.ns, "member-gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	var members []string
	for _, w := range []string{"worker-a", "worker-b"} {
		s.c.Create(s.ctx, t, builder.PodGroup(s.ns, w).MinCount(4).TopologyKey(rackLabel).Parent("job").Workload("job", w).Obj())
		for i := range 4 {
			name := fmt.Sprintf("%s-%d", w, i)
			members = append(members, name)
			s.c.Create(s.ctx, t, s.pod(name).CPU("1").PodGroup(w).ClaimFromTemplate("gpu", "member-gpu").Obj())
		}
	}
	framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members and 3 holds bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 11, seen, err
	})
	stop()

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
	nominated := planned()
	var lines []string
	racks := map[string]map[string]bool{}
	for _, m := range members {
		node := bound[m]
		lines = append(lines, fmt.Sprintf("%-10s planned %-40s bound %-40s %s/%s", m, nominated[m], node, blockOf[node], rackOf[node]))
		if nominated[m] != node {
			t.Errorf("%s: planned on %q, bound on %q", m, nominated[m], node)
		}
		if blockOf[node] != "b1" {
			t.Errorf("%s: bound in block %q, want b1", m, blockOf[node])
		}
		w := m[:strings.LastIndex(m, "-")]
		if racks[w] == nil {
			racks[w] = map[string]bool{}
		}
		racks[w][rackOf[node]] = true
	}
	sort.Strings(lines)
	t.Logf("per member, the autoscaler's plan and the scheduler's binding:\n%s", strings.Join(lines, "\n"))
	if len(racks["worker-a"]) != 1 || len(racks["worker-b"]) != 1 {
		t.Errorf("racks per child %v, want one each", racks)
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
