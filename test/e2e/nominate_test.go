package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// nominationGroup is a group of 3-GPU nodes whose drivers publish their
// devices driverDelay after the node registers: long enough for a few
// passes (one a second here) to nominate pods for a registered node before
// the scheduler can use it.
func (s *scenario) nominationGroup(name string, max int) kwok.NodeGroupConfig {
	g := s.gpuGroup(name, max, 3)
	g.DriverDelay = metav1.Duration{Duration: 6 * time.Second}
	return g
}

// outcomes reads nomination_outcomes_total by outcome.
func outcomes(t *testing.T, ctx context.Context, a *framework.Autoscaler) map[string]int {
	t.Helper()
	m, err := a.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	re := regexp.MustCompile(`(?m)^cluster_autoscaler_nomination_outcomes_total\{outcome="(\w+)"\} (\d+)$`)
	for _, match := range re.FindAllStringSubmatch(m, -1) {
		n, _ := strconv.Atoi(match[2])
		out[match[1]] = n
	}
	return out
}

// membersOn counts the pods of the test on each node.
func (s *scenario) membersOn(t *testing.T, prefix string) map[string]int {
	t.Helper()
	pods, err := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

// A node half used (a pod holding one of its three GPUs and half its
// CPUs) and a gang of four one-GPU members: the plan fills the used node
// (two members) and adds one node for the other two. Left alone, the real
// scheduler places the gang by its own scores once the new node is
// usable: least-allocated first, three members on the empty new node and
// one on the used node, stranding a GPU there. With nominations it tries
// each member's planned node first and the gang lands as planned; the
// metric counts every nomination followed. Without them nothing is
// nominated and the scheduler's spread stands.
//
// Not parallel with the other tests: the scheduler clears the members'
// nominations after each failed attempt of the group and the autoscaler
// writes them again in its next pass (docs/gangs.md, "Landing as
// planned"), so the gang lands as planned only if that pass comes before
// the scheduler's successful attempt; every autoscaler simulates the whole
// shared cluster, and beside three other tests (-parallel 4) its passes
// were slow enough to lose that race in two runs of four.
func TestNominationsSteerTheScheduler(t *testing.T) {
	for _, tc := range []struct {
		name     string
		on       bool
		existing int // members on the used node
	}{
		{"on", true, 2},
		{"off", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			g := s.nominationGroup("gpu", 3)
			a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fmt.Sprintf("--nominate-planned-nodes=%v", tc.on))
			tmpl := s.gpuTemplate(t)
			s.c.Create(s.ctx, t, s.pod("hold").CPU("32").ClaimFromTemplate("gpu", tmpl).Obj())
			used := s.podNode(t, "hold")
			s.gang(t, "train", 4, "")
			framework.Eventually(s.ctx, t, 3*time.Minute, "all 4 members bound", func(ctx context.Context) (bool, string, error) {
				n, seen, err := s.podsSeen(ctx)
				return n == 5, seen, err
			})
			on := s.membersOn(t, "train-")
			if s.groupSize(t, g.Name) != 2 {
				t.Errorf("group has %d nodes, want 2", s.groupSize(t, g.Name))
			}
			if on[used] != tc.existing {
				t.Errorf("members by node %v: %d on the used node %s, want %d", on, on[used], used, tc.existing)
			}
			want := map[string]int{"followed": 0, "ignored": 0, "dropped": 0}
			if tc.on {
				// hold on its node, two members on the used node, two
				// on the new one.
				want["followed"] = 5
			}
			framework.Eventually(s.ctx, t, 30*time.Second, "nomination outcomes counted", func(ctx context.Context) (bool, string, error) {
				got := outcomes(t, ctx, a)
				return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprint(got), nil
			})
		})
	}
}

// A pod planned on a new node that is tainted as it registers: the
// scheduler cannot use it, so the nomination is not followed; after
// --nomination-timeout the autoscaler clears it and counts it as ignored
// (that it does not nominate the pod again: TestVirtualNominationTimeout
// in pkg/autoscaler, in virtual time).
func TestNominationIgnoredIsCleared(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.nominationGroup("gpu", 1)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, "--nomination-timeout=5s")
	tmpl := s.gpuTemplate(t)
	s.c.Create(s.ctx, t, s.pod("p").CPU("1").ClaimFromTemplate("gpu", tmpl).Obj())
	var node string
	framework.Eventually(s.ctx, t, time.Minute, "the new node registered", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		if len(nodes) > 0 {
			node = nodes[0].Name
		}
		return node != "", fmt.Sprintf("%d nodes", len(nodes)), err
	})
	// Before its devices are published (driverDelay), so the scheduler
	// never could use it.
	patch := `{"spec":{"taints":[{"key":"example.com/blocked","value":"true","effect":"NoSchedule"}]}}`
	if _, err := s.c.Client.CoreV1().Nodes().Patch(s.ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(s.ctx, t, time.Minute, "p nominated for "+node, func(ctx context.Context) (bool, string, error) {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pod.Status.NominatedNodeName == node, "nominated " + pod.Status.NominatedNodeName, nil
	})
	framework.Eventually(s.ctx, t, time.Minute, "the nomination counted as ignored", func(ctx context.Context) (bool, string, error) {
		got := outcomes(t, ctx, a)
		return got["ignored"] == 1, fmt.Sprint(got), nil
	})
	framework.Eventually(s.ctx, t, 30*time.Second, "p's nomination cleared", func(ctx context.Context) (bool, string, error) {
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pod.Spec.NodeName == "" && pod.Status.NominatedNodeName == "", describePod(pod) + " nominated=" + pod.Status.NominatedNodeName, nil
	})
	if got := outcomes(t, s.ctx, a); got["followed"] != 0 {
		t.Errorf("outcomes %v, want none followed", got)
	}
	if !strings.Contains(a.Log(), `"Nomination ended"`) || !strings.Contains(a.Log(), `outcome="ignored"`) {
		t.Error("autoscaler log lacks the ignored nomination")
	}
}
