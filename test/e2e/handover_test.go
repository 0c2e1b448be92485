package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// replicas runs autoscalers with leader election, one at a time in the
// foreground: the test kills the leader and starts the next one.
type replicas struct {
	s      *scenario
	cfg    kwok.Config
	args   []string
	leader *framework.Autoscaler
	kills  int
}

func (r *replicas) start(t *testing.T) {
	r.leader = r.s.c.StartAutoscaler(t, r.cfg, r.args...)
	framework.Eventually(r.s.ctx, t, time.Minute, "the new replica leads", func(ctx context.Context) (bool, string, error) {
		return strings.Contains(r.leader.Log(), "Became leader"), "", nil
	})
}

// kill SIGKILLs the leader and starts the next.
func (r *replicas) kill(t *testing.T) {
	r.leader.Kill()
	r.kills++
	r.start(t)
}

// gangsAcrossHandovers runs gangs g0..g<rounds-1> of four one-GPU members
// (two nodes each) on group g, one after the other: once the leader of
// the moment (leaderLog) asked for a gang's nodes, handover passes the
// lease on; the gang must then run on exactly its own nodes, the next
// leader finding the instances the last one asked for (no double
// scale-up).
func (s *scenario) gangsAcrossHandovers(t *testing.T, g kwok.NodeGroupConfig, rounds int, leaderLog func() string, handover func()) {
	t.Helper()
	for i := range rounds {
		name := fmt.Sprintf("g%d", i)
		s.gang(t, name, 4, "")
		asked := fmt.Sprintf(`gang="%s/%s"`, s.ns, name)
		framework.Eventually(s.ctx, t, 2*time.Minute, name+": the leader asked for its nodes", func(ctx context.Context) (bool, string, error) {
			return strings.Contains(grepLines(leaderLog(), `"Scale-up"`), asked), "", nil
		})
		handover()
		framework.Eventually(s.ctx, t, 2*time.Minute, name+" Running", func(ctx context.Context) (bool, string, error) {
			pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			c := gangRunning(pods.Items)[name]
			return c[0] == 4, fmt.Sprintf("%d/%d", c[0], c[1]), nil
		})
		nodes, err := s.groupNodes(s.ctx, g.Name)
		if err != nil {
			t.Fatal(err)
		}
		if want := 2 * (i + 1); len(nodes) != want {
			t.Fatalf("after %d gangs and as many handovers: %d nodes, want exactly %d", i+1, len(nodes), want)
		}
	}
}

// removalsAcrossHandovers ends the first half of the gangs and passes the
// lease on in the middle of removals, up to rounds times, until only the
// other half's nodes are left, none tainted or cordoned.
func (s *scenario) removalsAcrossHandovers(t *testing.T, g kwok.NodeGroupConfig, rounds int, handover func()) {
	t.Helper()
	for i := range rounds / 2 {
		for j := range 4 {
			name := fmt.Sprintf("g%d-%d", i, j)
			if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep := rounds // the remaining gangs' nodes
	for range rounds {
		_, total, err := s.tainted(s.ctx, g.Name)
		if err != nil {
			t.Fatal(err)
		}
		if total <= keep {
			break // every idle node is gone
		}
		framework.Eventually(s.ctx, t, 2*time.Minute, "a node being removed", func(ctx context.Context) (bool, string, error) {
			tainted, total, err := s.tainted(ctx, g.Name)
			return len(tainted) > 0 || total <= keep, fmt.Sprintf("%d nodes, tainted %v", total, tainted), err
		})
		handover()
	}
	framework.Eventually(s.ctx, t, 3*time.Minute, "exactly the running gangs' nodes, none tainted or cordoned", func(ctx context.Context) (bool, string, error) {
		tainted, total, err := s.tainted(ctx, g.Name)
		return total == keep && len(tainted) == 0, fmt.Sprintf("%d nodes, tainted %v", total, tainted), err
	})
}

// tainted are the group's nodes carrying the scale-down taint or cordoned.
func (s *scenario) tainted(ctx context.Context, group string) ([]string, int, error) {
	nodes, err := s.groupNodes(ctx, group)
	var out []string
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			out = append(out, n.Name+"(cordoned)")
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key == drain.ToBeDeletedTaint {
				out = append(out, n.Name)
			}
		}
	}
	return out, len(nodes), err
}

// The leader is SIGKILLed in the middle of a gang scale-up, ten times in a
// row, and then in the middle of scale-downs, ten times: every gang gets
// exactly the nodes it needs (no double scale-up by the next leader, which
// finds the instances the dead one asked for), and no node is left tainted
// or cordoned.
func TestLeaderKilledMidScaleUpAndDrain(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.gpuGroup("gpu2", 24, 2)
	g.BootDelay.Duration = 3 * time.Second // the kill lands while nodes boot
	r := &replicas{s: s, cfg: kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, args: []string{
		"--namespace=" + s.ns, "--leader-elect=true", "--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=250ms",
		"--max-node-provision-time=1m", "--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s",
		"--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=0s"}}
	r.start(t)
	const rounds = 10
	s.gangsAcrossHandovers(t, g, rounds, func() string { return r.leader.Log() }, func() { r.kill(t) })
	// Half the gangs finish: their 10 nodes go, a kill in the middle of
	// each removal.
	s.removalsAcrossHandovers(t, g, rounds, func() { r.kill(t) })
	pods, _ := s.c.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	running := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running != 4*rounds/2 {
		t.Errorf("%d pods Running, want the %d of the remaining gangs", running, 4*rounds/2)
	}
	t.Logf("%d leader kills; %d nodes for %d running gangs", r.kills, rounds, rounds/2)
}
