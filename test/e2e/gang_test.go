package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

const rackLabel = "example.com/rack"

// gang creates a PodGroup (gang, minCount = size) and size pods each
// claiming one GPU.
func (s *scenario) gang(t *testing.T, name string, size int, topologyKey string) {
	pg := builder.PodGroup(s.ns, name).MinCount(int32(size))
	if topologyKey != "" {
		pg = pg.TopologyKey(topologyKey)
	}
	s.c.Create(s.ctx, t, pg.Obj(), builder.ClaimTemplate(s.ns, name+"-gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	for i := range size {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("%s-%d", name, i)).CPU("1").PodGroup(name).ClaimFromTemplate("gpu", name+"-gpu").Obj())
	}
}

// byGangCycle runs a gang test in parallel with the others and fails it
// if the autoscaler it started never planned a gang with the scheduler's
// pod group cycle: a gang planned without it would pass unnoticed.
// The cycle needs the cluster's gates (GenericWorkload for GangScheduling,
// TopologyAwareWorkloadScheduling for the placement plugins) in the
// autoscaler's simulated scheduler too; the harness gives every
// autoscaler the cluster's gates.
func byGangCycle(t *testing.T, test func(t *testing.T) *framework.Autoscaler) {
	t.Parallel()
	if a := test(t); !plannedByCycle(a.Log()) {
		t.Error("no gang was planned with the pod group cycle")
	}
}

func plannedByCycle(log string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"Gang planned"`) && strings.Contains(line, "cycle=true") {
			return true
		}
	}
	return false
}

func (s *scenario) nodeCounts(ctx context.Context, groups ...kwok.NodeGroupConfig) ([]int, string, error) {
	var counts []int
	var seen []string
	for _, g := range groups {
		nodes, err := s.groupNodes(ctx, g.Name)
		if err != nil {
			return nil, "", err
		}
		counts = append(counts, len(nodes))
		seen = append(seen, fmt.Sprintf("%s=%d", g.Name, len(nodes)))
	}
	return counts, strings.Join(seen, " "), nil
}

// A gang of 8 one-GPU pods on 2-GPU nodes: exactly 4 nodes, asked for in
// one atomic request, and the real scheduler binds all 8.
func TestGangScaleUpAllAtOnce(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		g := s.gpuGroup("gpu2", 8, 2)
		a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
		s.gang(t, "train", 8, "")
		framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == 8, seen, err
		})
		counts, seen, err := s.nodeCounts(s.ctx, g)
		if err != nil || counts[0] != 4 {
			t.Fatalf("nodes: %s (%v), want 4", seen, err)
		}
		framework.Eventually(s.ctx, t, 30*time.Second, "a PodGroup event of one +4 scale-up", func(ctx context.Context) (bool, string, error) {
			msgs, err := s.events(ctx, "train", "TriggeredScaleUp")
			return len(msgs) > 0 && strings.Contains(msgs[0], g.Name+" +4"), fmt.Sprintf("%q", msgs), err
		})
		m, _ := a.Metrics(s.ctx)
		if !strings.Contains(m, fmt.Sprintf(`cluster_autoscaler_scaled_up_nodes_total{node_group=%q} 4`, g.Name)) {
			t.Error("scaled_up_nodes_total is not 4")
		}
		return a
	})
}

// Never part of a gang: two groups could take 7 of the 8 members between
// them, which a pod-by-pod planner would provision; we add nothing, and the
// PodGroup and its pods hear why.
func TestGangNeverPartial(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		a, b := s.gpuGroup("two", 2, 2), s.gpuGroup("three", 1, 3) // at most 4 + 3 GPUs
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}})
		s.gang(t, "train", 8, "")
		framework.Eventually(s.ctx, t, time.Minute, "the gang told why it gets nothing", func(ctx context.Context) (bool, string, error) {
			msgs, err := s.events(ctx, "train", "NotTriggerScaleUp")
			return len(msgs) > 0 && strings.Contains(msgs[0], "minCount 8"), fmt.Sprintf("%q", msgs), err
		})
		framework.Consistently(s.ctx, t, 5*time.Second, "no node added for part of the gang", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, a, b)
			return err == nil && counts[0]+counts[1] == 0, seen, err
		})
		return as
	})
}

// A gang too big for any one group is spread over two groups, all or
// nothing: 2 + 2 nodes of 2 GPUs for 8 members.
func TestGangAcrossGroups(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		a, b := s.gpuGroup("a", 2, 2), s.gpuGroup("b", 2, 2)
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}})
		s.gang(t, "train", 8, "")
		framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == 8, seen, err
		})
		if counts, seen, _ := s.nodeCounts(s.ctx, a, b); counts[0] != 2 || counts[1] != 2 {
			t.Fatalf("nodes %s, want 2 and 2", seen)
		}
		return as
	})
}

// A gang with a topology constraint lands in one rack: rack-a can hold 3
// nodes (6 GPUs), rack-b 4 (8 GPUs): all 4 nodes go to rack-b, and the
// scheduler, placing the gang in one rack too, binds every member there.
func TestGangInOneRack(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		ra, rb := s.gpuGroup("rack-a", 3, 2), s.gpuGroup("rack-b", 4, 2)
		ra.Topology = map[string]string{rackLabel: "rack-a"}
		rb.Topology = map[string]string{rackLabel: "rack-b"}
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{ra, rb}})
		s.gang(t, "train", 8, rackLabel)
		framework.Eventually(s.ctx, t, 4*time.Minute, "all 8 members bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == 8, seen, err
		})
		if counts, seen, _ := s.nodeCounts(s.ctx, ra, rb); counts[0] != 0 || counts[1] != 4 {
			t.Fatalf("nodes %s, want none in rack-a and 4 in rack-b", seen)
		}
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Spec.NodeName, rb.Name+"-") {
				t.Errorf("%s on %s, not in rack-b", p.Name, p.Spec.NodeName)
			}
		}
		return as
	})
}

// Injected partial failure: the 4th node of a gang's scale-up never
// registers. After --max-node-provision-time every node added for the gang
// is removed, registered ones too, the group is backed off, and no member
// ever runs.
func TestGangPartialFailureRollsBack(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		g := s.gpuGroup("gpu2", 8, 2)
		g.Faults.NeverRegisterAfter = ptr.To(3)
		a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, "--max-node-provision-time=6s")
		s.gang(t, "train", 8, "")
		framework.Eventually(s.ctx, t, time.Minute, "3 of the 4 nodes registered", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			return err == nil && counts[0] == 3, seen, err
		})
		framework.Eventually(s.ctx, t, time.Minute, "every node of the gang removed", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			return err == nil && counts[0] == 0, seen, err
		})
		framework.Eventually(s.ctx, t, 30*time.Second, "the gang timeout counted and the group backed off", func(ctx context.Context) (bool, string, error) {
			m, err := a.Metrics(ctx)
			want := []string{
				`cluster_autoscaler_failed_scale_ups_total{reason="gangTimeout"} 1`,
				fmt.Sprintf(`cluster_autoscaler_node_group_backed_off{node_group=%q,reason="gangTimeout"} 1`, g.Name),
			}
			for _, w := range want {
				if !strings.Contains(m, w) {
					return false, "missing " + w, err
				}
			}
			return true, "", err
		})
		// Backed off: no new attempt for a while, and nobody ran meanwhile.
		framework.Consistently(s.ctx, t, 4*time.Second, "no node and no member bound", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			n, pods, perr := s.podsSeen(ctx)
			if perr != nil {
				err = perr
			}
			return err == nil && counts[0] == 0 && n == 0, seen + "; " + pods, err
		})
		return a
	})
}

// Twenty two-member gangs arrive at once over two groups with room for
// ten each: one pass books each gang's nodes against its group's room,
// so both groups take ten gangs, the provider refuses nothing, no group
// is backed off, and every member runs.
func TestGangsOfOnePassFillTwoGroups(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		a, b := s.gpuGroup("a", 20, 1), s.gpuGroup("b", 20, 1)
		const gangs, size = 20, 2
		for i := range gangs {
			s.gang(t, fmt.Sprintf("train%02d", i), size, "")
		}
		// Started after the gangs exist: its first pass sees all of them.
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}})
		framework.Eventually(s.ctx, t, 5*time.Minute, "every member bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == gangs*size, seen, err
		})
		if counts, seen, err := s.nodeCounts(s.ctx, a, b); err != nil || counts[0] != 20 || counts[1] != 20 {
			t.Errorf("nodes %s (%v), want 20 and 20", seen, err)
		}
		m, err := as.Metrics(s.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if failed := sumSamples(m, "cluster_autoscaler_failed_scale_ups_total"); failed != "0" {
			t.Errorf("%s failed scale-ups, want none", failed)
		}
		// Every way a group gets backed off logs "backed off".
		if strings.Contains(as.Log(), "backed off") {
			t.Error("a group was backed off")
		}
		return as
	})
}

// minCount is mutable (workload scaling): a gang too big for its group
// gets nothing until its minCount is lowered while it is pending; then
// the next pass plans for the new minCount only, the scheduler binds
// that many members, and the rest wait.
func TestGangMinCountLoweredWhilePending(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		g := s.gpuGroup("gpu2", 2, 2) // at most 4 GPUs
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
		s.gang(t, "train", 8, "")
		s.waitEvent(t, "train", "NotTriggerScaleUp", time.Minute, "minCount 8")
		pg, err := s.c.Client.SchedulingV1beta1().PodGroups(s.ns).Get(s.ctx, "train", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pg.Spec.SchedulingPolicy.Gang.MinCount = 4
		if _, err := s.c.Client.SchedulingV1beta1().PodGroups(s.ns).Update(s.ctx, pg, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(s.ctx, t, 3*time.Minute, "4 members bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == 4, seen, err
		})
		if counts, seen, err := s.nodeCounts(s.ctx, g); err != nil || counts[0] != 2 {
			t.Errorf("nodes %s (%v), want 2", seen, err)
		}
		return as
	})
}

// A kwok group whose provider picks the rack per request: a two-member
// gang constrained to the rack goes into one request (two new nodes of
// one fresh rack); a second gang, arriving when that rack is full, gets a
// request and a rack of its own.
func TestGangIntoAProviderAssignedRack(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		g := s.gpuGroup("blocks", 4, 1)
		g.PerRequestTopology = []string{rackLabel}
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
		racks := func(want int) map[string][]string {
			t.Helper()
			framework.Eventually(s.ctx, t, 3*time.Minute, fmt.Sprintf("%d members bound", want), func(ctx context.Context) (bool, string, error) {
				n, seen, err := s.podsSeen(ctx)
				return n == want, seen, err
			})
			nodes, err := s.groupNodes(s.ctx, g.Name)
			if err != nil {
				t.Fatal(err)
			}
			rackOf := map[string]string{}
			for _, n := range nodes {
				rackOf[n.Name] = n.Labels[rackLabel]
			}
			pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			byGang := map[string][]string{}
			for _, p := range pods.Items {
				gang := strings.Split(p.Name, "-")[0]
				byGang[gang] = append(byGang[gang], rackOf[p.Spec.NodeName])
			}
			t.Logf("racks of each gang's members: %v (nodes %v)", byGang, rackOf)
			return byGang
		}
		s.gang(t, "first", 2, rackLabel)
		first := racks(2)["first"]
		if len(first) != 2 || first[0] == "" || first[0] != first[1] {
			t.Fatalf("first gang on racks %q, want both members on one fresh rack", first)
		}
		s.gang(t, "second", 2, rackLabel)
		second := racks(4)["second"]
		if len(second) != 2 || second[0] == "" || second[0] != second[1] || second[0] == first[0] {
			t.Errorf("second gang on racks %q, want one rack of its own (the first's %q is full)", second, first[0])
		}
		if counts, seen, err := s.nodeCounts(s.ctx, g); err != nil || counts[0] != 4 {
			t.Errorf("nodes %s (%v), want 4", seen, err)
		}
		return as
	})
}

// A PodGroup claim (DRAWorkloadResourceClaims): the gang's members share
// one network-attached fabric link through a claim the PodGroup owns,
// and each takes a GPU of its own. The cluster has one link: planned
// per member, the second would find none and the gang nothing; planned
// as the group's, two one-GPU nodes come, the real scheduler binds both
// members, and the controller's one claim holds the link.
//
// The gang is constrained to a rack: kube-scheduler 1.37.2's DRA
// PodGroupPostFilter fails with "not found" (a SchedulerError, which no
// autoscaler acts on) for an unplaceable gang with PodGroup claims unless
// it has topology constraints, where it returns early.
func TestGangSharesAPodGroupClaim(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.gpuGroup("gpu1", 4, 1)
	g.Topology = map[string]string{rackLabel: "r1"}
	fabric := s.ns + "-fabric.example.com"
	s.c.Create(s.ctx, t, builder.DeviceClass(s.ns+"-fabric").Driver(fabric).Obj(),
		builder.ResourceSlice(s.ns+"-fabric", "", fabric, "fabric").Devices(builder.Device("link-0")).Obj(),
		builder.ClaimTemplate(s.ns, "link").Request(builder.Request("link", s.ns+"-fabric")).Obj(),
		builder.ClaimTemplate(s.ns, "gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj(),
		builder.PodGroup(s.ns, "train").MinCount(2).TopologyKey(rackLabel).ClaimFromTemplate("link", "link").Obj())
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").
			ClaimFromTemplate("link", "link").ClaimFromTemplate("gpu", "gpu").Obj())
	}
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}
	s.c.StartAutoscaler(t, cfg)
	framework.Eventually(s.ctx, t, 3*time.Minute, "both members bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 2, seen, err
	})
	if counts, seen, err := s.nodeCounts(s.ctx, g); err != nil || counts[0] != 2 {
		t.Errorf("nodes %s (%v), want 2", seen, err)
	}
	claims, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, c := range claims.Items {
		if c.Annotations["resource.kubernetes.io/pod-claim-name"] == "link" {
			links++
			if c.Status.Allocation == nil || len(c.OwnerReferences) != 1 || c.OwnerReferences[0].Kind != "PodGroup" {
				t.Errorf("link claim %s: owners %+v allocation %v, want the PodGroup's, allocated", c.Name, c.OwnerReferences, c.Status.Allocation)
			}
		}
	}
	if links != 1 {
		t.Errorf("%d link claims, want the PodGroup's one", links)
	}
	// A gang whose PodGroup claim asks two links (there is one): explain
	// on a member names the PodGroup's claim as what the group lacks.
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "links").Request(builder.Request("link", s.ns+"-fabric").Count(2)).Obj(),
		builder.PodGroup(s.ns, "greedy").MinCount(2).TopologyKey(rackLabel).ClaimFromTemplate("link", "links").Obj())
	for i := range 2 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("greedy-%d", i)).CPU("1").PodGroup("greedy").
			ClaimFromTemplate("link", "links").ClaimFromTemplate("gpu", "gpu").Obj())
	}
	s.waitUnschedulable(t, "greedy-0")
	r := s.explainJSON(t, cfg, "greedy-0")
	named := false
	for _, v := range r.NodeGroups {
		named = named || strings.Contains(v.Constraint, "the claim of PodGroup greedy")
	}
	if !named {
		t.Errorf("explain on greedy-0 does not name the PodGroup's claim: %+v", r.NodeGroups)
	}
}

// explain on a member of a gang constrained to a rack names every rack
// tried and what it lacked, the rack chosen, and where each member is
// planned: rack-a can hold 2 nodes (4 GPUs), rack-b 4 (8 GPUs), the gang
// needs 8.
func TestExplainGangDomains(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	ra, rb := s.gpuGroup("rack-a", 2, 2), s.gpuGroup("rack-b", 4, 2)
	ra.Topology = map[string]string{rackLabel: "rack-a"}
	rb.Topology = map[string]string{rackLabel: "rack-b"}
	s.gang(t, "train", 8, rackLabel)
	s.waitUnschedulable(t, "train-0")
	r := s.explainJSON(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{ra, rb}}, "train-0")
	t.Logf("gang %s: domains %+v; members %+v", r.Gang, r.GangDomains, r.GangMembers)
	verdicts := map[string]string{}
	for _, d := range r.GangDomains {
		verdicts[d.Domain] = d.Verdict
		if d.Verdict == explain.DomainCannotHost && d.Message == "" {
			t.Errorf("domain %s cannot host the gang but says not why", d.Domain)
		}
	}
	if verdicts["rack-a"] != explain.DomainCannotHost || verdicts["rack-b"] != explain.DomainChosen {
		t.Errorf("domain verdicts %v, want rack-a %s and rack-b %s", verdicts, explain.DomainCannotHost, explain.DomainChosen)
	}
	if len(r.GangMembers) != 8 {
		t.Fatalf("%d members placed, want 8", len(r.GangMembers))
	}
	for _, m := range r.GangMembers {
		if !strings.Contains(m.Node, rb.Name) {
			t.Errorf("member %s planned on %s, not a new node of %s", m.Pod, m.Node, rb.Name)
		}
	}
}
