package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// faultyAndGood is a 1-GPU group with the fault, which least-waste prefers
// for a 1-GPU pod, and a healthy 2-GPU group to fall back on.
func (s *scenario) faultyAndGood(fault func(*kwok.FaultsConfig)) (bad, good kwok.NodeGroupConfig) {
	bad, good = s.gpuGroup("bad", 2, 1), s.gpuGroup("good", 2, 2)
	fault(&bad.Faults)
	return bad, good
}

// groupStatus is the status entry of group, or nil.
func groupStatus(st *status.AutoscalerStatus, group string) *status.GroupSection {
	for i := range st.NodeGroups {
		if st.NodeGroups[i].Name == group {
			return &st.NodeGroups[i]
		}
	}
	return nil
}

// A node that registers but never turns Ready, and one whose driver
// publishes an incomplete pool: each is given up after the provision time
// with an event naming it and what it lacks, the pod runs on the other
// group, and the faulty node is never the group's template. While the
// simulation counts on the faulty node past the disagreement threshold,
// the pod is told that node is registered but not usable, and why.
func TestNodesThatNeverBecomeUsable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(*kwok.FaultsConfig)
		lacks string
	}{
		{"never-ready", func(f *kwok.FaultsConfig) { f.NeverReady = true }, "not Ready"},
		{"incomplete-pool", func(f *kwok.FaultsConfig) { f.IncompletePool = true }, "slices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			bad, good := s.faultyAndGood(tc.fault)
			s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{bad, good}},
				"--namespace="+s.ns, "--max-node-provision-time=8s", "--initial-node-group-backoff-duration=5m",
				"--scheduler-disagreement-threshold=2s")
			tmpl := s.gpuNICTemplate(t)
			s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())

			var badNode string
			framework.Eventually(s.ctx, t, time.Minute, "the faulty group's node registered", func(ctx context.Context) (bool, string, error) {
				nodes, err := s.groupNodes(ctx, bad.Name)
				if len(nodes) > 0 {
					badNode = nodes[0].Name
				}
				return badNode != "", fmt.Sprintf("%d nodes", len(nodes)), err
			})
			// While it exists, the status says it is skipped as template.
			st := s.waitStatus(t, "the faulty node skipped as template", func(st *status.AutoscalerStatus) bool {
				g := groupStatus(st, bad.Name)
				return g != nil && strings.Contains(strings.Join(g.TemplateSkipped, " "), badNode)
			})
			if g := groupStatus(st, bad.Name); g.TemplateSource == "node/"+badNode {
				t.Errorf("the faulty node is the template: %+v", g)
			}
			framework.Eventually(s.ctx, t, time.Minute, "the faulty node given up, with an event naming it", func(ctx context.Context) (bool, string, error) {
				nodes, err := s.groupNodes(ctx, bad.Name)
				if err != nil {
					return false, "", err
				}
				msgs, err := eventMessages(ctx, s.c, s.ns, "cluster-autoscaler-status", "ScaleUpTimedOut")
				named := false
				for _, m := range msgs {
					named = named || strings.Contains(m, badNode) && strings.Contains(m, tc.lacks)
				}
				return len(nodes) == 0 && named, fmt.Sprintf("%d nodes, events %q", len(nodes), msgs), err
			})
			msg := s.waitEvent(t, "infer", disagree.ReasonSchedulerDisagreement, 10*time.Second, "node "+badNode, "not usable", tc.lacks)
			t.Logf("disagreement: %s", msg)
			framework.Eventually(s.ctx, t, 2*time.Minute, "the pod runs on the healthy group", func(ctx context.Context) (bool, string, error) {
				p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "infer", metav1.GetOptions{})
				if err != nil {
					return false, "", err
				}
				return strings.HasPrefix(p.Spec.NodeName, good.Name+"-"), describePod(p), nil
			})
		})
	}
}

// An autoscaler restarted while the instances of its request never
// register still gives them up when the first process would have: their
// deadline is their creation time, which the provider keeps, plus
// --max-node-provision-time; not the restart plus that time.
func TestRestartKeepsProvisionDeadlines(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.gpuGroup("never", 2, 2)
	g.Faults.NeverRegister = true
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}
	const provision = 20 * time.Second
	args := []string{"--namespace=" + s.ns, "--max-node-provision-time=" + provision.String()}
	first := s.c.StartAutoscaler(t, cfg, args...)
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("infer").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	framework.Eventually(s.ctx, t, time.Minute, "the scale-up asked for", func(ctx context.Context) (bool, string, error) {
		return strings.Contains(first.Log(), `"Scale-up"`), "", nil
	})
	asked := time.Now()
	time.Sleep(provision / 2)
	first.Kill()
	restarted := time.Now()
	second := s.c.StartAutoscaler(t, cfg, args...)
	var gaveUp time.Time
	framework.Eventually(s.ctx, t, 2*provision, "the restarted autoscaler gives the instance up", func(ctx context.Context) (bool, string, error) {
		msgs, err := eventMessages(ctx, s.c, s.ns, "cluster-autoscaler-status", "ScaleUpTimedOut")
		if len(msgs) > 0 {
			gaveUp = time.Now()
		}
		return len(msgs) > 0, fmt.Sprintf("%q", msgs), err
	})
	// Judged from the instance's creation, the give-up comes about
	// provision after the request; judged from the restart it would come
	// a half provision later.
	if late := restarted.Add(provision - provision/4); gaveUp.After(late) {
		t.Errorf("given up %s after the request and %s after the restart: the deadline was not kept across the restart",
			gaveUp.Sub(asked).Round(time.Second), gaveUp.Sub(restarted).Round(time.Second))
	}
	if !strings.Contains(second.Log(), "not usable within the provision time") {
		t.Errorf("the second process did not log the give-up")
	}
	t.Logf("asked at 0s, restarted at %s, given up at %s", restarted.Sub(asked).Round(100*time.Millisecond), gaveUp.Sub(asked).Round(100*time.Millisecond))
}
