package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations/upkeep"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// zoneGroup puts a group's nodes under a kwok controller of the test's
// own (framework.Zone), so that the test can take them down together.
func zoneGroup(g kwok.NodeGroupConfig, zone *framework.Zone) kwok.NodeGroupConfig {
	if g.Template.Annotations == nil {
		g.Template.Annotations = map[string]string{}
	}
	g.Template.Annotations[kwok.AnnotationKwokNode] = zone.Name
	return g
}

// waitReady waits until every node's Ready condition is True (ready) or
// not.
func (s *scenario) waitReady(t *testing.T, ready bool, timeout time.Duration, nodes ...string) {
	t.Helper()
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("nodes Ready=%v", ready), func(ctx context.Context) (bool, string, error) {
		var wrong []string
		for _, name := range nodes {
			n, err := s.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if nodeReady(n) != ready {
				wrong = append(wrong, name)
			}
		}
		return len(wrong) == 0, fmt.Sprintf("not yet: %v", wrong), nil
	})
}

// quickEviction has the pod leave an unreachable or NotReady node 5s after
// its taint instead of 5 minutes: the outage's pods turn Terminating soon.
func quickEviction(p *corev1.Pod) *corev1.Pod {
	for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](5)})
	}
	return p
}

// readyReplicas waits until each ReplicaSet (by name) has that many ready
// replicas.
func (s *scenario) readyReplicas(t *testing.T, timeout time.Duration, want map[string]int32) {
	t.Helper()
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("ready replicas %v", want), func(ctx context.Context) (bool, string, error) {
		var seen []string
		ok := true
		for name, n := range want {
			rs, err := s.c.Client.AppsV1().ReplicaSets(s.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			seen = append(seen, fmt.Sprintf("%s %d/%d", name, rs.Status.ReadyReplicas, n))
			ok = ok && rs.Status.ReadyReplicas == n
		}
		sort.Strings(seen)
		return ok, strings.Join(seen, ", "), nil
	})
}

// destroyed lists what the autoscaler did to the group's nodes: gone
// (fewer than want), deletion-tainted or cordoned.
func (s *scenario) destroyed(ctx context.Context, group string, want int) (string, error) {
	tainted, total, err := s.tainted(ctx, group)
	if err != nil {
		return "", err
	}
	if total < want || len(tainted) > 0 {
		return fmt.Sprintf("%d of %d nodes left, tainted or cordoned: %v", total, want, tainted), nil
	}
	return "", nil
}

// statusOf reads the autoscaler's status ConfigMap in the test's namespace
// (the autoscaler runs with --namespace of it); an error until it exists.
func (s *scenario) statusOf(ctx context.Context) (*status.AutoscalerStatus, error) {
	st, err := status.Read(ctx, s.c.Client, s.ns, "cluster-autoscaler-status")
	if err == nil && st == nil {
		err = fmt.Errorf("no status ConfigMap in %s yet", s.ns)
	}
	return st, err
}

// A zone goes dark with a failover on top: six nodes of zone b run pods,
// their heartbeats stop, they turn NotReady and their pods Terminating;
// the leader is killed and a new one takes over while the nodes are
// NotReady and far older than the provision time. The new leader has no
// memory of them: before the safety gate it took them for failed
// provisions and force-deleted them (Terminating pods counted as no work).
// Now nothing is deleted, evicted or cordoned for three minutes, the
// status says why, and when the heartbeats return every pod runs again.
func TestZoneOutageWithFailover(t *testing.T) {
	t.Parallel()
	s := newScenarioWithin(t, 15*time.Minute)
	zone := s.c.StartZone(t, s.ns+"-b")
	zoneA, zoneB := s.cpuGroup("zone-a", 4), zoneGroup(s.cpuGroup("zone-b", 6), zone)
	zoneA.Template.Labels[corev1.LabelTopologyZone] = s.ns + "-a"
	zoneB.Template.Labels[corev1.LabelTopologyZone] = s.ns + "-b"
	r := &replicas{s: s, cfg: kwok.Config{NodeGroups: []kwok.NodeGroupConfig{zoneA, zoneB}}, args: []string{
		"--namespace=" + s.ns, "--leader-elect=true", "--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=250ms",
		// Everything that could remove a node is as eager as it gets:
		// only the gate's rules keep the zone.
		"--max-node-provision-time=30s", "--scale-down-unneeded-time=10s", "--scale-down-unready-time=10s",
		"--scale-down-delay-after-add=0s", "--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=0s",
		// Unhealthy above five unready nodes, whatever else the shared
		// control plane holds.
		"--ok-total-unready-count=5", "--max-total-unready-percentage=0",
	}}
	r.start(t)
	s.replicas(t, "web-a", 2, quickEviction(s.pod("web-a").CPU("3").NodeSelector(corev1.LabelTopologyZone, s.ns+"-a").Obj()))
	s.replicas(t, "web-b", 6, quickEviction(s.pod("web-b").CPU("3").NodeSelector(corev1.LabelTopologyZone, s.ns+"-b").Obj()))
	s.readyReplicas(t, 3*time.Minute, map[string]int32{"web-a": 2, "web-b": 6})
	nodes, err := s.groupNodes(s.ctx, zoneB.Name)
	if err != nil || len(nodes) != 6 {
		t.Fatalf("zone b: %d nodes (%v), want 6", len(nodes), err)
	}
	var dark []string
	for _, n := range nodes {
		dark = append(dark, n.Name)
	}
	sort.Strings(dark)
	framework.Eventually(s.ctx, t, time.Minute, "zone b's nodes marked usable", func(ctx context.Context) (bool, string, error) {
		var unmarked []string
		for _, name := range dark {
			n, err := s.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if _, ok := safety.UsableSince(n); !ok {
				unmarked = append(unmarked, name)
			}
		}
		return len(unmarked) == 0, fmt.Sprintf("unmarked: %v", unmarked), nil
	})

	release := holdOutage(t)
	zone.Stop()
	s.waitReady(t, false, 3*time.Minute, dark...)
	framework.Eventually(s.ctx, t, 2*time.Minute, "zone b's pods Terminating", func(ctx context.Context) (bool, string, error) {
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web-b"})
		if err != nil {
			return false, "", err
		}
		terminating := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil && p.Spec.NodeName != "" {
				terminating++
			}
		}
		return terminating == 6, fmt.Sprintf("%d terminating", terminating), nil
	})
	r.leader.Kill()
	r.start(t)
	tookOver := time.Now()
	framework.Consistently(s.ctx, t, 3*time.Minute, "nothing deleted, evicted or cordoned by the new leader", func(ctx context.Context) (bool, string, error) {
		what, err := s.destroyed(ctx, zoneB.Name, 6)
		if what != "" || err != nil {
			return false, what, err
		}
		if l := r.leader.Log(); strings.Contains(l, "Evicted pod") || strings.Contains(l, "Removing empty node") || strings.Contains(l, "Draining and removing node") {
			return false, "the new leader removed or drained: " + grepLines(l, "Evicted pod") + grepLines(l, "Removing empty node") + grepLines(l, "Draining and removing"), nil
		}
		return true, "", nil
	})
	st, err := s.statusOf(s.ctx)
	if err != nil || st == nil {
		t.Fatalf("status: %v", err)
	}
	if !strings.Contains(st.Message, "not autoscaling") || st.ClusterWide.Health.Status != status.HealthUnhealthy {
		t.Errorf("status %q (health %s): want it to say it is not autoscaling, and why", st.Message, st.ClusterWide.Health.Status)
	}
	t.Logf("%s after the takeover the new leader says: %q", time.Since(tookOver).Round(time.Second), st.Message)
	for _, h := range st.HeldBack {
		t.Logf("  held back: %s of %q (%s): %s", h.Action, h.Node, h.Rule, h.Message)
	}
	for _, name := range dark {
		n, err := s.c.Client.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		since, _ := safety.UsableSince(n)
		t.Logf("node %s: Ready=%v, usable since %s; the new leader kept it (cluster unhealthy; once usable, so no failed scale-up); its log about it: %s",
			name, nodeReady(n), since.Format(time.RFC3339), grepLines(r.leader.Log(), name))
	}

	zone.Start(t)
	s.waitReady(t, true, 3*time.Minute, dark...)
	release()
	s.readyReplicas(t, 3*time.Minute, map[string]int32{"web-a": 2, "web-b": 6})
	if what, err := s.destroyed(s.ctx, zoneB.Name, 6); what != "" || err != nil {
		t.Errorf("after the outage: %s %v", what, err)
	}
}

// A node the autoscaler saw usable, that is NotReady after a restart
// (alone: the cluster stays healthy), is no failed scale-up: the
// restarted tracker never removes it, however long past the provision
// time. Only scale-down may, with --scale-down-unready-enabled, after
// --scale-down-unready-time, and it says so on the node.
func TestOnceUsableNodeAfterRestart(t *testing.T) {
	t.Parallel()
	s := newScenarioWithin(t, 8*time.Minute)
	zone := s.c.StartZone(t, s.ns)
	g := zoneGroup(s.cpuGroup("once", 3), zone)
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}
	base := []string{"--namespace=" + s.ns, "--max-node-provision-time=20s", "--scale-down-unneeded-time=1h",
		"--scale-down-delay-after-add=0s", "--scale-down-unready-enabled=false"}
	first := s.c.StartAutoscaler(t, cfg, base...)
	s.c.Create(s.ctx, t, s.pod("web").CPU("1").Obj())
	var node string
	framework.Eventually(s.ctx, t, 2*time.Minute, "the pod's node marked usable", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, g.Name)
		if err != nil || len(nodes) != 1 {
			return false, fmt.Sprintf("%d nodes", len(nodes)), err
		}
		node = nodes[0].Name
		_, ok := safety.UsableSince(&nodes[0])
		return ok, fmt.Sprintf("annotations %v", nodes[0].Annotations), nil
	})
	first.Stop()
	// The work is done; the node goes dark while nobody watches.
	if err := s.c.Client.CoreV1().Pods(s.ns).Delete(s.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	zone.Stop()
	s.waitReady(t, false, 3*time.Minute, node)

	second := s.c.StartAutoscaler(t, cfg, base...)
	framework.Consistently(s.ctx, t, 45*time.Second, "the restarted tracker keeps the node", func(ctx context.Context) (bool, string, error) {
		ok, err := s.nodeExists(ctx, node)
		if !ok || err != nil {
			return false, "node gone: " + grepLines(second.Log(), "given up") + grepLines(second.Log(), "not usable"), err
		}
		tainted, _, err := s.tainted(ctx, g.Name)
		return len(tainted) == 0, fmt.Sprintf("tainted %v", tainted), err
	})
	second.Stop()

	third := s.c.StartAutoscaler(t, cfg, append(base, "--scale-down-unready-enabled=true", "--scale-down-unready-time=20s")...)
	framework.Eventually(s.ctx, t, 2*time.Minute, "scale-down removes the unready node", func(ctx context.Context) (bool, string, error) {
		ok, err := s.nodeExists(ctx, node)
		return !ok, "", err
	})
	if msgs, err := clusterEvents(s.ctx, s.c, node, "ScaleDown"); err != nil || len(msgs) == 0 {
		t.Errorf("no ScaleDown event on node %s (%v)", node, err)
	}
	if !strings.Contains(third.Log(), "Removing empty node") {
		t.Errorf("the node was not removed by scale-down:\n%s", grepLines(third.Log(), node))
	}
}

// outage serialises the tests that take a zone's nodes down on purpose:
// every autoscaler counts the shared control plane's unready nodes, so one
// test's outage (six nodes dark) held another's cluster unhealthy past its
// recovery (TestCapacityBlockEndingWhileUnhealthy failed so in make test).
var outage sync.Mutex

// holdOutage takes the outage lock until the returned release is called
// or t ends.
func holdOutage(t *testing.T) (release func()) {
	outage.Lock()
	var once sync.Once
	release = func() { once.Do(outage.Unlock) }
	t.Cleanup(release)
	return release
}

// A capacity block ends while the cluster is unhealthy: its node is not
// cordoned and its pod not evicted, and an event on the reservation says
// why; once the cluster is healthy again, the drain goes on and the pod
// moves to an on-demand node.
func TestCapacityBlockEndingWhileUnhealthy(t *testing.T) {
	t.Parallel()
	s := newScenarioWithin(t, 12*time.Minute)
	crs := reservationsClient(t, s.c)
	blk, ond := s.oneGPUGroups("gpu-block", "gpu-ondemand", time.Second)
	zone := s.c.StartZone(t, s.ns)
	sick := zoneGroup(s.cpuGroup("sick", 4), zone)
	name := s.ns + "-block"
	now := time.Now()
	createCapacityBlock(s.ctx, t, crs, name, blk.Name, 1, now.Add(-time.Hour), now.Add(3*time.Hour))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{blk, ond, sick}}, "--namespace="+s.ns,
		"--reservation-end-margin=30m", "--ok-total-unready-count=3", "--max-total-unready-percentage=0",
		// Nodes younger than this are still starting: not counted unready.
		"--max-node-provision-time=30s")
	s.replicaSet(t, "train", s.gpuPod("train", s.gpuTemplate(t), ""))
	s.replicas(t, "filler", 4, s.pod("filler").CPU("3").NodeSelector(kwok.LabelNodeGroup, sick.Name).Obj())
	s.readyReplicas(t, 3*time.Minute, map[string]int32{"train": 1, "filler": 4})
	pods, _, err := s.appPods(s.ctx, "train")
	if err != nil || len(pods) != 1 || !strings.HasPrefix(pods[0].Spec.NodeName, blk.Name+"-") {
		t.Fatalf("train pods %d (%v), want one on the block", len(pods), err)
	}
	blockNode, trainPod := pods[0].Spec.NodeName, pods[0].Name
	sickNodes, err := s.groupNodes(s.ctx, sick.Name)
	if err != nil {
		t.Fatal(err)
	}
	var dark []string
	for _, n := range sickNodes {
		dark = append(dark, n.Name)
	}
	// Until the end: the drain needs the whole control plane healthy again.
	holdOutage(t)
	zone.Stop()
	s.waitReady(t, false, 3*time.Minute, dark...)
	s.waitStatus(t, "the cluster unhealthy", func(st *status.AutoscalerStatus) bool { return strings.Contains(st.Message, "not autoscaling") })

	patchSpec(s.ctx, t, crs, name, map[string]any{"end": rfc3339(time.Now().Add(10 * time.Minute))})
	framework.Eventually(s.ctx, t, time.Minute, "an event saying the drain is held back", func(ctx context.Context) (bool, string, error) {
		msgs, err := clusterEvents(ctx, s.c, name, upkeep.EventDrainHeld)
		return len(msgs) > 0 && strings.Contains(msgs[0], string(safety.RuleUnhealthy)), strings.Join(msgs, "; "), err
	})
	framework.Consistently(s.ctx, t, 30*time.Second, "the block's node neither cordoned nor drained", func(ctx context.Context) (bool, string, error) {
		n, err := s.c.Client.CoreV1().Nodes().Get(ctx, blockNode, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, trainPod, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return !n.Spec.Unschedulable && p.DeletionTimestamp == nil, fmt.Sprintf("cordoned %v, %s", n.Spec.Unschedulable, describePod(p)), nil
	})

	zone.Start(t)
	s.waitReady(t, true, 3*time.Minute, dark...)
	framework.Eventually(s.ctx, t, 3*time.Minute, "the pod moved to an on-demand node", func(ctx context.Context) (bool, string, error) {
		pods, seen, err := s.appPods(ctx, "train")
		return err == nil && len(pods) == 1 && strings.HasPrefix(pods[0].Spec.NodeName, ond.Name+"-"), seen, err
	})
	if msgs, err := clusterEvents(s.ctx, s.c, name, upkeep.EventDraining); err != nil || len(msgs) == 0 {
		t.Errorf("no draining event on the reservation once healthy (%v)", err)
	}
}

// A node whose DRA driver publishes an incomplete pool (it announces one
// slice more than it publishes, and never changes) stops counting as
// coming capacity after --dra-pool-stall-time: a pending GPU pod that the
// node's template would hold gets a node of another group long before
// --max-node-provision-time, and an event on the node names the pool.
func TestStalledPoolScalesElsewhere(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	stuck, good := s.gpuGroup("stuck", 1, 2), s.gpuGroup("good", 2, 2)
	stuck.Faults.IncompletePool = true
	const stall = 20 * time.Second
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{stuck, good}}, "--namespace="+s.ns,
		"--dra-pool-stall-time="+stall.String(), "--max-node-provision-time=10m")
	tmpl := s.gpuNICTemplate(t)
	s.c.Create(s.ctx, t, s.pod("first").CPU("1").ClaimFromTemplate("accel", tmpl).NodeSelector(kwok.LabelNodeGroup, stuck.Name).Obj())
	var node string
	framework.Eventually(s.ctx, t, 2*time.Minute, "the stuck group's node Ready", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, stuck.Name)
		if err != nil || len(nodes) != 1 || !nodeReady(&nodes[0]) {
			return false, fmt.Sprintf("%d nodes", len(nodes)), err
		}
		node = nodes[0].Name
		return true, "", nil
	})
	registered := time.Now()
	// Its template has room for this one too: until the pool stalls, the
	// node is coming capacity for it.
	s.c.Create(s.ctx, t, s.pod("second").CPU("1").ClaimFromTemplate("accel", tmpl).Obj())
	framework.Eventually(s.ctx, t, 2*time.Minute, "the second pod on a node of the good group", func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return strings.HasPrefix(p.Spec.NodeName, good.Name+"-"), describePod(p), nil
	})
	t.Logf("the second pod got a good node %s after the stuck node registered (stall time %s)", time.Since(registered).Round(time.Second), stall)
	framework.Eventually(s.ctx, t, time.Minute, "an event naming the stalled pool", func(ctx context.Context) (bool, string, error) {
		msgs, err := clusterEvents(ctx, s.c, node, "DRAPoolStalled")
		ok := len(msgs) > 0 && strings.Contains(msgs[0], s.gpu) && strings.Contains(msgs[0], "pool "+node)
		return ok, strings.Join(msgs, "; ") + grepLines(a.Log(), "DRAPoolStalled"), err
	})
	if ok, err := s.nodeExists(s.ctx, node); !ok || err != nil {
		t.Errorf("the stalled node was removed before --max-node-provision-time (%v)", err)
	}
}
