package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// fastScaleDown shortens scale-down's clocks for tests.
var fastScaleDown = []string{
	"--scale-down-unneeded-time=2s",
	"--scale-down-delay-after-add=0s",
	"--scale-down-delay-after-delete=1s",
	"--scale-down-delay-after-failure=2s",
	"--max-graceful-termination-sec=5",
	"--max-pod-eviction-time=20s",
}

const safeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// existingNode creates a node of group g (and its slices) as if it had
// been there before the autoscaler started: the provider adopts it.
func (s *scenario) existingNode(t *testing.T, g kwok.NodeGroupConfig, suffix string, annotations map[string]string) string {
	t.Helper()
	node, slices := kwok.NodeObjects(g, g.Name+"-"+suffix)
	for k, v := range annotations {
		node.Annotations[k] = v
	}
	s.c.Create(s.ctx, t, node)
	for _, sl := range slices {
		s.c.Create(s.ctx, t, sl)
	}
	return node.Name
}

// migGroup is a group of nodes with one GPU offered as 7 partitions
// through a shared counter set.
func (s *scenario) migGroup(name string, max int) kwok.NodeGroupConfig {
	g := s.cpuGroup(name, max)
	g.Template.Capacity[corev1.ResourceCPU] = resource.MustParse("16")
	var devs []resourceapi.Device
	for i := range 7 {
		devs = append(devs, resourceapi.Device{Name: fmt.Sprintf("gpu-0-mig-%d", i), ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
			CounterSet: "gpu-0", Counters: map[string]resourceapi.Counter{"slices": {Value: resource.MustParse("1")}},
		}}})
	}
	g.Template.Drivers = []kwok.DriverConfig{{
		Driver:         s.gpu,
		SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"slices": {Value: resource.MustParse("7")}}}},
		Devices:        devs,
	}}
	return g
}

// replicaSet runs one replica of pod under a ReplicaSet.
func (s *scenario) replicaSet(t *testing.T, name string, pod *corev1.Pod) {
	t.Helper()
	s.replicas(t, name, 1, pod)
}

// replicas runs n replicas of pod under a ReplicaSet (labelled app=name).
func (s *scenario) replicas(t *testing.T, name string, n int32, pod *corev1.Pod) {
	t.Helper()
	labels := map[string]string{"app": name}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	if _, err := s.c.Client.AppsV1().ReplicaSets(s.ns).Create(s.ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// appPods lists the running (bound, not deleted) pods with app=name.
func (s *scenario) appPods(ctx context.Context, name string) ([]corev1.Pod, string, error) {
	list, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, "", err
	}
	var out []corev1.Pod
	var seen []string
	for _, p := range list.Items {
		seen = append(seen, describePod(&p))
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out, strings.Join(seen, "; "), nil
}

// boundTo waits until the only live pod of app name is bound to node.
func (s *scenario) boundTo(t *testing.T, name, node string, timeout time.Duration) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("a pod of %s running on %s", name, node), func(ctx context.Context) (bool, string, error) {
		pods, seen, err := s.appPods(ctx, name)
		if len(pods) == 1 && pods[0].Spec.NodeName == node && pods[0].Status.Phase == corev1.PodRunning {
			got = pods[0]
			return true, seen, err
		}
		return false, seen, err
	})
	return got
}

func (s *scenario) nodeExists(ctx context.Context, name string) (bool, error) {
	_, err := s.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (s *scenario) waitNodeGone(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(s.ctx, t, timeout, "node "+name+" removed", func(ctx context.Context) (bool, string, error) {
		ok, err := s.nodeExists(ctx, name)
		return !ok, fmt.Sprintf("exists=%v", ok), err
	})
}

func (s *scenario) nodeStays(t *testing.T, d time.Duration, names ...string) {
	t.Helper()
	framework.Consistently(s.ctx, t, d, fmt.Sprintf("nodes %v kept", names), func(ctx context.Context) (bool, string, error) {
		for _, n := range names {
			if ok, err := s.nodeExists(ctx, n); !ok || err != nil {
				return false, n + " is gone", err
			}
		}
		return true, "", nil
	})
}

// nodeEvents returns the messages of events with reason about a node
// (cluster-scoped objects' events go to the default namespace).
func (s *scenario) nodeEvents(ctx context.Context, node, reason string) ([]string, error) {
	return eventMessages(ctx, s.c, metav1.NamespaceDefault, node, reason)
}

// metricAtLeast waits until a metric sample (name with labels, as
// exposed) reaches want.
func metricAtLeast(t *testing.T, s *scenario, a *framework.Autoscaler, sample string, want float64, timeout time.Duration) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`)
	framework.Eventually(s.ctx, t, timeout, fmt.Sprintf("%s >= %v", sample, want), func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		if err != nil {
			return false, "", err
		}
		match := re.FindStringSubmatch(m)
		if match == nil {
			return false, "no sample", nil
		}
		v, err := strconv.ParseFloat(match[1], 64)
		return v >= want, match[0], err
	})
}

// An empty GPU node is removed once it has been unneeded for
// --scale-down-unneeded-time (not before: TestVirtualUnneededTime in
// pkg/autoscaler, in virtual time).
func TestScaleDownEmptyGPUNode(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.gpuGroup("gpu", 4, 8)
	node := s.existingNode(t, g, "idle", nil)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, append(fastScaleDown, "--scale-down-unneeded-time=8s")...)
	s.waitNodeGone(t, node, time.Minute)
	metricAtLeast(t, s, a, `cluster_autoscaler_scaled_down_nodes_total{reason="empty"}`, 1, 10*time.Second)
	framework.Eventually(s.ctx, t, 20*time.Second, "ScaleDown events on the node", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.nodeEvents(ctx, node, "ScaleDown")
		return len(msgs) >= 2, fmt.Sprintf("%q", msgs), err
	})
}

// A node whose one pod (ReplicaSet-owned) fits elsewhere is drained and
// removed; the real scheduler binds the replacement pod on the other node.
func TestScaleDownDrainsMovablePod(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	from := s.existingNode(t, g, "from", nil)
	s.replicaSet(t, "web", s.pod("web").CPU("1").Obj())
	evicted := s.boundTo(t, "web", from, time.Minute)
	// The other node is busy (half full, with a pod that has no
	// controller), so only the first node is a candidate.
	to := s.existingNode(t, g, "to", nil)
	s.c.Create(s.ctx, t, s.pod("busy").CPU("2").Node(to).Obj())
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, from, 90*time.Second)
	moved := s.boundTo(t, "web", to, time.Minute)
	if moved.UID == evicted.UID {
		t.Fatalf("pod %s was not replaced", moved.Name)
	}
	metricAtLeast(t, s, a, `cluster_autoscaler_evicted_pods_total`, 1, 10*time.Second)
	metricAtLeast(t, s, a, `cluster_autoscaler_scaled_down_nodes_total{reason="underutilized"}`, 1, 10*time.Second)
	msgs, err := s.events(s.ctx, evicted.Name, "ScaleDown")
	if err != nil || len(msgs) == 0 {
		t.Errorf("no ScaleDown event on the evicted pod %s (%v)", evicted.Name, err)
	}
	if ok, _ := s.nodeExists(s.ctx, to); !ok {
		t.Errorf("node %s that took the pod was removed too", to)
	}
}

// A pod whose PodDisruptionBudget allows no disruption keeps its node; an
// empty node next to it goes, so the autoscaler was not idle.
func TestScaleDownRespectsPDB(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	guarded := s.existingNode(t, g, "guarded", nil)
	idle := s.existingNode(t, g, "idle", nil)
	pod := s.pod("guarded").CPU("1").Label("app", "guarded").Node(guarded).Obj()
	pod.Annotations = map[string]string{safeToEvict: "true"}
	s.c.Create(s.ctx, t, pod)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}
	if _, err := s.c.Client.PolicyV1().PodDisruptionBudgets(s.ns).Create(s.ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, idle, time.Minute)
	metricAtLeast(t, s, a, `cluster_autoscaler_unremovable_nodes_count{reason="NotEnoughPdb"}`, 1, 10*time.Second)
	s.nodeStays(t, 6*time.Second, guarded)
}

// A node running one member of a running 4-pod gang (minCount 4) stays,
// though the member would fit elsewhere: evicting it stops the gang.
func TestScaleDownKeepsGangMember(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	three := s.existingNode(t, g, "three", nil)
	one := s.existingNode(t, g, "one", nil)
	idle := s.existingNode(t, g, "idle", nil)
	s.c.Create(s.ctx, t, builder.PodGroup(s.ns, "train").MinCount(4).Obj())
	for i := range 4 {
		node := three
		if i == 3 {
			node = one
		}
		p := s.pod(fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").Node(node).Obj()
		p.Annotations = map[string]string{safeToEvict: "true"} // only the gang rule may keep the node
		s.c.Create(s.ctx, t, p)
	}
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, idle, time.Minute)
	metricAtLeast(t, s, a, `cluster_autoscaler_unremovable_nodes_count{reason="RunningGangMember"}`, 1, 10*time.Second)
	s.nodeStays(t, 6*time.Second, one, three)
}

// A gang spread over two underutilized nodes moves whole when there is
// room for all of it: both nodes go together and both members are evicted.
func TestScaleDownMovesSpreadGangWhole(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	a, b := s.existingNode(t, g, "a", nil), s.existingNode(t, g, "b", nil)
	room := s.existingNode(t, g, "room", nil)
	s.c.Create(s.ctx, t, s.pod("busy").CPU("2").Node(room).Obj()) // half full: not a candidate
	s.c.Create(s.ctx, t, builder.PodGroup(s.ns, "train").MinCount(2).Obj())
	for i, node := range []string{a, b} {
		p := s.pod(fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").Node(node).Obj()
		p.Annotations = map[string]string{safeToEvict: "true"}
		s.c.Create(s.ctx, t, p)
	}
	m := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, a, 90*time.Second)
	s.waitNodeGone(t, b, 30*time.Second)
	metricAtLeast(t, s, m, `cluster_autoscaler_evicted_pods_total`, 2, 10*time.Second)
	if ok, _ := s.nodeExists(s.ctx, room); !ok {
		t.Errorf("node %s, the gang's new room, was removed", room)
	}
}

// A GPU of which one of seven partitions is used, by a pod that fits the
// free partitions of another node's GPU, is consolidated: the node goes
// and the replacement pod's claim is allocated on the other node.
func TestScaleDownConsolidatesPartitions(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.migGroup("mig", 4)
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "slice").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	sparse := s.existingNode(t, g, "sparse", nil)
	s.replicaSet(t, "infer", s.pod("infer").CPU("1").ClaimFromTemplate("gpu", "slice").Obj())
	s.boundTo(t, "infer", sparse, time.Minute)
	dense := s.existingNode(t, g, "dense", nil)
	for i := range 4 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("dense-%d", i)).CPU("1").ClaimFromTemplate("gpu", "slice").
			NodeSelector(corev1.LabelHostname, dense).Obj())
	}
	framework.Eventually(s.ctx, t, time.Minute, "4 pods on "+dense, func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 5, seen, err
	})
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, sparse, 90*time.Second)
	moved := s.boundTo(t, "infer", dense, time.Minute)
	var claimName string
	for _, st := range moved.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			claimName = *st.ResourceClaimName
		}
	}
	claim, err := s.c.Client.ResourceV1().ResourceClaims(s.ns).Get(s.ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %q of %s: %v", claimName, moved.Name, err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 || claim.Status.Allocation.Devices.Results[0].Pool != dense {
		t.Fatalf("claim %s allocated %+v, want one partition of %s", claimName, claim.Status.Allocation, dense)
	}
}

// Bad input is reported and the loop goes on: a PodDisruptionBudget that
// selects no pod is evented, a node whose scale-down-disabled annotation
// is not a boolean is evented and kept, and an empty node is still removed.
func TestScaleDownBadInput(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	odd := s.existingNode(t, g, "odd", map[string]string{"cluster-autoscaler.kubernetes.io/scale-down-disabled": "perhaps"})
	idle := s.existingNode(t, g, "idle", nil)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "nobody"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nobody"}}},
	}
	if _, err := s.c.Client.PolicyV1().PodDisruptionBudgets(s.ns).Create(s.ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.waitNodeGone(t, idle, time.Minute)
	framework.Eventually(s.ctx, t, 20*time.Second, "warnings on the PDB and the node", func(ctx context.Context) (bool, string, error) {
		onPDB, err := s.events(ctx, "nobody", "SelectsNoPods")
		if err != nil {
			return false, "", err
		}
		onNode, err := s.nodeEvents(ctx, odd, "InvalidAnnotation")
		return len(onPDB) > 0 && len(onNode) > 0, fmt.Sprintf("pdb %q, node %q", onPDB, onNode), err
	})
	metricAtLeast(t, s, a, `cluster_autoscaler_unremovable_nodes_count{reason="ScaleDownDisabledAnnotation"}`, 1, 10*time.Second)
	s.nodeStays(t, 4*time.Second, odd)
	if a.Exited() {
		t.Fatal("the autoscaler exited")
	}
}
