package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// cliqueLabel is the label NVIDIA's GPU feature discovery puts the
// multi-node NVLink domain of a node in.
const cliqueLabel = "nvidia.com/gpu.clique"

// unitGroup is a group of units (issue 41): nodes of 4 GPUs that come 4
// at a time, each unit one fresh clique the provider picks, at most max
// nodes.
func (s *scenario) unitGroup(name string, max int) kwok.NodeGroupConfig {
	g := s.gpuGroup(name, max, 4)
	g.UnitSize, g.PerRequestTopology = 4, []string{cliqueLabel}
	return g
}

// wholeNodeGang creates a PodGroup (gang, minCount = size, topology the
// clique) of size pods that each claim all 4 GPUs of a node.
func (s *scenario) wholeNodeGang(t *testing.T, name string, size int) {
	s.c.Create(s.ctx, t, builder.PodGroup(s.ns, name).MinCount(int32(size)).TopologyKey(cliqueLabel).Obj(),
		builder.ClaimTemplate(s.ns, name+"-gpus").Request(builder.Request("gpu", s.ns+"-gpu").Count(4)).Obj())
	for i := range size {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("%s-%d", name, i)).CPU("1").PodGroup(name).ClaimFromTemplate("gpu", name+"-gpus").Obj())
	}
}

// A gang of 3 pods × 4 GPUs in one clique takes one new unit of 4 nodes,
// in one request, its members on 3 nodes of one clique. A pod wanting 4
// GPUs in a clique, arriving while the unit boots, takes the unit's
// fourth node: no new unit. A gang of 5 × 4 GPUs fits no unit (a clique
// has 4 nodes): nothing is added, and its pods are told why. Scale-down
// keeps the unit's idle node while its mates work, and removes the idle
// unit whole.
func TestUnitsOfScale(t *testing.T) {
	byGangCycle(t, func(t *testing.T) *framework.Autoscaler {
		s := newScenario(t)
		s.c.InstallCRD(s.ctx, t, nodeGroupCRD)
		dyn, err := dynamic.NewForConfig(s.c.Config)
		if err != nil {
			t.Fatal(err)
		}
		g := s.unitGroup("nvl", 12) // room for two units
		// unitsAre waits for g's NodeGroup to list one unit of 4 nodes
		// with idle nodes and GPUs free (its 16 NICs are never claimed).
		unitsAre := func(idle, gpus int32) {
			t.Helper()
			want := []v1alpha1.DriverDevices{{Driver: s.gpu, Devices: gpus}, {Driver: s.nic, Devices: 16}}
			if gpus == 0 {
				want = want[1:]
			}
			slices.SortFunc(want, func(a, b v1alpha1.DriverDevices) int { return strings.Compare(a.Driver, b.Driver) })
			framework.Eventually(s.ctx, t, time.Minute, fmt.Sprintf("NodeGroup: one unit of 4 nodes, %d idle, free devices %v", idle, want), func(ctx context.Context) (bool, string, error) {
				ngs, err := nodeGroups(ctx, dyn)
				if err != nil {
					return false, "", err
				}
				st := ngs[g.Name].Status
				return st.UnitSize == 4 && len(st.Units) == 1 && st.Units[0].Nodes == 4 && st.Units[0].IdleNodes == idle &&
					slices.Equal(st.Units[0].FreeDevices, want) && strings.HasPrefix(st.Units[0].Domain, cliqueLabel+"="), fmt.Sprintf("%+v", st.Units), nil
			})
		}
		// Booting takes long enough for the single pod to arrive while the
		// unit boots.
		g.BootDelay = metav1.Duration{Duration: 10 * time.Second}
		// Idle nodes are unneeded after 2 s: the unit's free node must
		// stay all the same while its unit mates work.
		as := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}},
			"--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s")
		s.wholeNodeGang(t, "train", 3)
		s.waitEvent(t, "train-0", "TriggeredScaleUp", time.Minute)

		// One pod wanting a whole node's 4 GPUs in some clique, while the
		// unit boots: its free node is that room.
		s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "four").Request(builder.Request("gpu", s.ns+"-gpu").Count(4)).Obj())
		single := s.pod("single").CPU("1").ClaimFromTemplate("gpu", "four").Obj()
		single.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: cliqueLabel, Operator: corev1.NodeSelectorOpExists}}}}}}}
		s.c.Create(s.ctx, t, single)
		framework.Eventually(s.ctx, t, 3*time.Minute, "the gang's 3 members and the single pod bound", func(ctx context.Context) (bool, string, error) {
			n, seen, err := s.podsSeen(ctx)
			return n == 4, seen, err
		})
		nodes, err := s.groupNodes(s.ctx, g.Name)
		if err != nil {
			t.Fatal(err)
		}
		unitsAre(0, 0)
		cliques := map[string]bool{}
		for _, n := range nodes {
			cliques[n.Labels[cliqueLabel]] = true
		}
		if len(nodes) != 4 || len(cliques) != 1 || cliques[""] {
			t.Fatalf("%d nodes in cliques %v, want one unit: 4 nodes of one clique", len(nodes), cliques)
		}

		// Too big for a unit: nothing comes.
		s.wholeNodeGang(t, "big", 5)
		// The pod group cycle names the unit as what falls short.
		want := []string{"minCount 5", "is 4 nodes, one domain of " + cliqueLabel, "would need 5"}
		s.waitEvent(t, "big-0", "NotTriggerScaleUp", time.Minute, want...)
		// Explain, a process of its own, says the same.
		if r := s.explainJSON(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, "big-0"); !containsAll(r.Summary, want...) {
			t.Errorf("explain's summary %q, want it to name %q", r.Summary, want)
		}
		framework.Consistently(s.ctx, t, 5*time.Second, "no node added for the gang no unit holds", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			return err == nil && counts[0] == 4, seen, err
		})
		if n, seen, err := s.podsSeen(s.ctx); err != nil || n != 4 {
			t.Errorf("%d pods bound (%v): %s; want the gang of 3 and the single pod only", n, err, seen)
		}

		// The single pod gone, its node idles; its unit mates work.
		if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, "single", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		framework.Consistently(s.ctx, t, 8*time.Second, "the unit's idle node kept while the rest of its unit works", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			return err == nil && counts[0] == 4, seen, err
		})
		unitsAre(1, 4)

		// All work gone: the whole unit goes.
		if err := s.c.Client.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(s.ctx, t, 2*time.Minute, "the idle unit removed whole", func(ctx context.Context) (bool, string, error) {
			counts, seen, err := s.nodeCounts(ctx, g)
			return err == nil && counts[0] == 0, seen, err
		})
		return as
	})
}

// Units on a reservation (issue 41): two unit groups, one launching only
// onto a 6-node reservation. The first gang's unit comes from the
// reservation; the second gang's from on-demand, since the 2 reserved
// nodes left are less than a unit. With all work gone the on-demand unit
// goes whole and the reserved unit stays (it saves nothing).
func TestUnitsOnAReservation(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	res, ond := s.unitGroup("nvl-res", 8), s.unitGroup("nvl-ond", 8)
	res.CapacityType, ond.CapacityType = kwok.CapacityReserved, kwok.CapacityOnDemand
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{res, ond},
		Reservations: []kwok.ReservationConfig{{ID: s.ns + "-block", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{res.Name}, Count: 6}}}
	s.c.StartAutoscaler(t, cfg, fastScaleDown...)
	s.wholeNodeGang(t, "first", 3)
	s.wholeNodeGang(t, "second", 3)
	framework.Eventually(s.ctx, t, 3*time.Minute, "both gangs bound, one unit in each group", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		counts, nodes, _ := s.nodeCounts(ctx, res, ond)
		return n == 6 && len(counts) == 2 && counts[0] == 4 && counts[1] == 4, seen + "; " + nodes, err
	})
	if err := s.c.Client.CoreV1().Pods(s.ns).DeleteCollection(s.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the on-demand unit removed whole", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, res, ond)
		return err == nil && counts[1] == 0, seen, err
	})
	framework.Consistently(s.ctx, t, 5*time.Second, "the reserved unit kept", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, res, ond)
		return err == nil && counts[0] == 4, seen, err
	})
}
