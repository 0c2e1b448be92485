package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations/upkeep"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// gpuPod needs a node of its own on one-GPU groups.
func (s *scenario) gpuPod(name, tmpl, runtime string) *corev1.Pod {
	pod := s.pod(name).CPU("1").ClaimFromTemplate("gpu", tmpl).Obj()
	if runtime != "" {
		pod.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: runtime}
	}
	return pod
}

// oneGPUGroups are a reserved-only group and an on-demand one, one GPU
// per node, booting slowly so that loops run while nodes boot.
func (s *scenario) oneGPUGroups(reserved, ondemand string, boot time.Duration) (kwok.NodeGroupConfig, kwok.NodeGroupConfig) {
	r, o := s.gpuGroup(reserved, 4, 1), s.gpuGroup(ondemand, 4, 1)
	// GPUs only: one slice per node, so a node is never seen with part
	// of its devices published.
	r.Template.Drivers, o.Template.Drivers = r.Template.Drivers[:1], o.Template.Drivers[:1]
	r.CapacityType, o.CapacityType = kwok.CapacityReserved, kwok.CapacityOnDemand
	r.BootDelay, o.BootDelay = metav1.Duration{Duration: boot}, metav1.Duration{Duration: boot}
	return r, o
}

// gpuTemplate is a claim template for one GPU.
func (s *scenario) gpuTemplate(t *testing.T) string {
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "one-gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj())
	return "one-gpu"
}

func (s *scenario) nodeOf(ctx context.Context, pod string) (string, string, error) {
	p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	return p.Spec.NodeName, describePod(p), nil
}

// waitOnGroup waits until pod runs on a node of group.
func (s *scenario) waitOnGroup(t *testing.T, pod, group string) {
	t.Helper()
	framework.Eventually(s.ctx, t, 2*time.Minute, pod+" bound to a node of "+group, func(ctx context.Context) (bool, string, error) {
		node, seen, err := s.nodeOf(ctx, pod)
		return node != "", seen, err
	})
	if node, seen, _ := s.nodeOf(s.ctx, pod); !strings.HasPrefix(node, group+"-") {
		t.Fatalf("%s: want a node of %s", seen, group)
	}
}

// A reservation of 2 nodes and 3 pods needing a node each: 2 reserved
// nodes and 1 on-demand in one loop; a 4th pod while they boot goes
// on-demand; the reserved group never passes 2 while loops run every
// second during the slow boot.
func TestReservationsReservedFirst(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	res, ond := s.oneGPUGroups("gpu-reserved", "gpu-ondemand", 12*time.Second)
	resID := s.ns + "-res"
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{res, ond},
		Reservations: []kwok.ReservationConfig{{ID: resID, Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{res.Name}, Count: 2}}})
	tmpl := s.gpuTemplate(t)

	// Watch the reserved group the whole time: nodes and target.
	var mu sync.Mutex
	maxSeen, stop := 0, make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nodes, _ := s.groupNodes(s.ctx, res.Name)
			target := 0.0
			if m, err := a.Metrics(s.ctx); err == nil {
				target = metricValue(m, "cluster_autoscaler_node_group_target_count", fmt.Sprintf("node_group=%q", res.Name))
			}
			mu.Lock()
			maxSeen = max(maxSeen, len(nodes), int(target))
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	for i := range 3 {
		s.c.Create(s.ctx, t, s.gpuPod(fmt.Sprintf("job-%d", i), tmpl, ""))
	}
	framework.Eventually(s.ctx, t, time.Minute, "3 nodes requested", func(ctx context.Context) (bool, string, error) {
		m, err := a.Metrics(ctx)
		r := metricValue(m, "cluster_autoscaler_node_group_target_count", fmt.Sprintf("node_group=%q", res.Name))
		o := metricValue(m, "cluster_autoscaler_node_group_target_count", fmt.Sprintf("node_group=%q", ond.Name))
		return r == 2 && o == 1, fmt.Sprintf("targets reserved=%v on-demand=%v", r, o), err
	})
	// Still booting: the 4th pod must not go onto the full reservation.
	if nodes, _ := s.groupNodes(s.ctx, res.Name); len(nodes) != 0 {
		t.Logf("reserved nodes registered before the 4th pod: %d (boot faster than expected)", len(nodes))
	}
	s.c.Create(s.ctx, t, s.gpuPod("job-3", tmpl, ""))
	framework.Eventually(s.ctx, t, 2*time.Minute, "all 4 pods bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 4, seen, err
	})
	counts, seen, err := s.nodeCounts(s.ctx, res, ond)
	if err != nil || counts[0] != 2 || counts[1] != 2 {
		t.Fatalf("nodes %s (err %v), want 2 reserved and 2 on-demand", seen, err)
	}
	// (Which pod lands where is the scheduler's choice: the nodes are alike.
	// The counts say the 4th pod's node came from the on-demand group.)
	// A few more loops with everything running.
	time.Sleep(3 * time.Second)
	mu.Lock()
	if maxSeen > 2 {
		t.Errorf("the reserved group reached %d nodes; the reservation holds 2", maxSeen)
	}
	mu.Unlock()
	m, err := a.Metrics(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cluster_autoscaler_launched_nodes_total", []string{`capacity_type="reserved"`}, 2},
		{"cluster_autoscaler_launched_nodes_total", []string{`capacity_type="on-demand"`}, 2},
		{"cluster_autoscaler_reservation_capacity_nodes", []string{fmt.Sprintf("reservation=%q", resID)}, 2},
		{"cluster_autoscaler_reservation_used_nodes", []string{fmt.Sprintf("reservation=%q", resID)}, 2},
		{"cluster_autoscaler_reservation_available_nodes", []string{fmt.Sprintf("reservation=%q", resID)}, 0},
		{"cluster_autoscaler_reservation_idle_nodes", []string{fmt.Sprintf("reservation=%q", resID)}, 0},
	} {
		if got := metricValue(m, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// A capacity block that starts in 10 minutes is not used; moved into the
// past, it is used first, and its status says so.
func TestReservationsCapacityBlockStart(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	blk, ond := s.oneGPUGroups("gpu-block", "gpu-ondemand", time.Second)
	name := s.ns + "-block"
	now := time.Now()
	createCapacityBlock(s.ctx, t, crs, name, blk.Name, 1, now.Add(10*time.Minute), now.Add(3*time.Hour))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{blk, ond}})
	tmpl := s.gpuTemplate(t)

	s.c.Create(s.ctx, t, s.gpuPod("early", tmpl, ""))
	s.waitOnGroup(t, "early", ond.Name)
	framework.Consistently(s.ctx, t, 2*time.Second, "one on-demand node, none on the block", func(ctx context.Context) (bool, string, error) {
		counts, seen, err := s.nodeCounts(ctx, blk, ond)
		return err == nil && counts[0] == 0 && counts[1] == 1, seen, err
	})
	framework.Eventually(s.ctx, t, time.Minute, "status says not started", func(ctx context.Context) (bool, string, error) {
		used, avail, active, err := reservationStatus(ctx, crs, name)
		return active == "NotStarted" && used == 0 && avail == 0, fmt.Sprintf("used=%d available=%d active=%s", used, avail, active), err
	})

	patchSpec(s.ctx, t, crs, name, map[string]any{"start": rfc3339(time.Now().Add(-time.Minute))})
	framework.Eventually(s.ctx, t, time.Minute, "status says active", func(ctx context.Context) (bool, string, error) {
		used, avail, active, err := reservationStatus(ctx, crs, name)
		return active == "Active" && avail == 1, fmt.Sprintf("used=%d available=%d active=%s", used, avail, active), err
	})
	s.c.Create(s.ctx, t, s.gpuPod("late", tmpl, ""))
	s.waitOnGroup(t, "late", blk.Name)
	framework.Eventually(s.ctx, t, time.Minute, "status counts the node", func(ctx context.Context) (bool, string, error) {
		used, avail, active, err := reservationStatus(ctx, crs, name)
		return active == "Active" && used == 1 && avail == 0, fmt.Sprintf("used=%d available=%d active=%s", used, avail, active), err
	})
}

// A block ending in 5 minutes, with a 30-minute margin, serves a pod
// declaring 2 minutes but not one declaring 2 hours; the short pod is not
// drained (it ends before the block does).
func TestReservationsCapacityBlockEnding(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	blk, ond := s.oneGPUGroups("gpu-block", "gpu-ondemand", time.Second)
	now := time.Now()
	createCapacityBlock(s.ctx, t, crs, s.ns+"-block", blk.Name, 2, now.Add(-time.Hour), now.Add(5*time.Minute))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{blk, ond}}, "--reservation-end-margin=30m")
	tmpl := s.gpuTemplate(t)

	s.c.Create(s.ctx, t, s.gpuPod("long", tmpl, "2h"))
	s.waitOnGroup(t, "long", ond.Name)
	s.c.Create(s.ctx, t, s.gpuPod("short", tmpl, "2m"))
	s.waitOnGroup(t, "short", blk.Name)
	framework.Consistently(s.ctx, t, 4*time.Second, "the short pod stays on an uncordoned node", func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "short", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		n, err := s.c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.DeletionTimestamp == nil && !n.Spec.Unschedulable, describePod(p), nil
	})
}

// Before a block ends (end minus margin) its nodes are cordoned and their
// pods evicted; the ReplicaSet's new pod gets an on-demand node.
func TestReservationsCapacityBlockDrain(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	blk, ond := s.oneGPUGroups("gpu-block", "gpu-ondemand", time.Second)
	name := s.ns + "-block"
	now := time.Now()
	createCapacityBlock(s.ctx, t, crs, name, blk.Name, 1, now.Add(-time.Hour), now.Add(3*time.Hour))
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{blk, ond}}, "--reservation-end-margin=30m")
	tmpl := s.gpuTemplate(t)
	pod := s.gpuPod("train", tmpl, "")
	labels := map[string]string{"app": "train"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "train"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}}
	if _, err := s.c.Client.AppsV1().ReplicaSets(s.ns).Create(s.ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningOn := func(ctx context.Context, group string) (bool, string, error) {
		pods, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=train"})
		if err != nil {
			return false, "", err
		}
		var seen []string
		ok := false
		for i := range pods.Items {
			p := &pods.Items[i]
			seen = append(seen, describePod(p))
			ok = ok || p.DeletionTimestamp == nil && strings.HasPrefix(p.Spec.NodeName, group+"-")
		}
		return ok, strings.Join(seen, "; "), nil
	}
	framework.Eventually(s.ctx, t, 2*time.Minute, "the pod on the block", func(ctx context.Context) (bool, string, error) { return runningOn(ctx, blk.Name) })

	patchSpec(s.ctx, t, crs, name, map[string]any{"end": rfc3339(time.Now().Add(10 * time.Minute))})
	framework.Eventually(s.ctx, t, 2*time.Minute, "the pod moved to an on-demand node", func(ctx context.Context) (bool, string, error) { return runningOn(ctx, ond.Name) })
	nodes, _ := s.groupNodes(s.ctx, blk.Name)
	if len(nodes) != 1 || !nodes[0].Spec.Unschedulable {
		t.Errorf("block nodes %d, cordoned %v; want its one node cordoned", len(nodes), len(nodes) == 1 && nodes[0].Spec.Unschedulable)
	}
	framework.Eventually(s.ctx, t, time.Minute, "a draining event on the reservation", func(ctx context.Context) (bool, string, error) {
		msgs, err := clusterEvents(ctx, s.c, name, upkeep.EventDraining)
		return len(msgs) > 0, strings.Join(msgs, "; "), err
	})
}

// The API server rejects a negative count and an end before the start
// with clear messages; objects stored anyway (under a relaxed schema) get
// a Warning event and are ignored, and the loop keeps scaling.
func TestReservationsInvalidObjects(t *testing.T) {
	s := newScenario(t)
	crs := reservationsClient(t, s.c)
	cpu := s.cpuGroup("cpu", 4)
	now := time.Now()
	for _, tc := range []struct {
		name, want string
		spec       map[string]any
	}{
		{"negative", "spec.count: Invalid value: -1: spec.count in body should be greater than or equal to 0",
			map[string]any{"nodeGroups": []any{cpu.Name}, "count": int64(-1)}},
		{"backwards", "end must be after start",
			map[string]any{"nodeGroups": []any{cpu.Name}, "count": int64(1), "start": rfc3339(now), "end": rfc3339(now.Add(-time.Hour))}},
	} {
		_, err := crs.Create(s.ctx, reservation(s.ns+"-"+tc.name, tc.spec), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("creating %s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}

	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}})
	// Relax the schema, store bad objects, put the schema back.
	dynCRDs := strictCRD(t)
	relaxed := dynCRDs.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(relaxed.Object, "spec", "versions")
	v := versions[0].(map[string]any)
	v["schema"] = map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
		"spec":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
		"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}
	delete(v, "additionalPrinterColumns")
	_ = unstructured.SetNestedSlice(relaxed.Object, versions, "spec", "versions")
	dyn := reservationsDynamic(t, s.c)
	if err := applyCRD(s.ctx, dyn, relaxed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = applyCRD(context.Background(), dyn, dynCRDs) })
	bad := map[string]map[string]any{
		"negative":  {"nodeGroups": []any{cpu.Name}, "count": int64(-3)},
		"backwards": {"nodeGroups": []any{cpu.Name}, "count": int64(1), "start": rfc3339(now), "end": rfc3339(now.Add(-time.Hour))},
		"garbage":   {"nodeGroups": []any{cpu.Name}, "count": "lots"},
	}
	for n, spec := range bad {
		obj := reservation(s.ns+"-"+n, spec)
		// The relaxed schema reaches every API server handler shortly after the update.
		framework.Eventually(s.ctx, t, 30*time.Second, "storing "+n+" under the relaxed schema", func(ctx context.Context) (bool, string, error) {
			_, err := crs.Create(ctx, obj, metav1.CreateOptions{})
			return err == nil, fmt.Sprint(err), nil
		})
		t.Cleanup(func() { _ = crs.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	}
	if err := applyCRD(s.ctx, dyn, dynCRDs); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{"negative": "must not be negative", "backwards": "must be after spec.start", "garbage": "malformed object"} {
		framework.Eventually(s.ctx, t, time.Minute, "a warning event on "+n, func(ctx context.Context) (bool, string, error) {
			msgs, err := clusterEvents(ctx, s.c, s.ns+"-"+n, upkeep.EventInvalid)
			return len(msgs) > 0 && strings.Contains(msgs[0], want), strings.Join(msgs, "; "), err
		})
	}
	framework.Eventually(s.ctx, t, time.Minute, "Valid=False on the stored negative count", func(ctx context.Context) (bool, string, error) {
		u, err := crs.Get(ctx, s.ns+"-negative", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Valid" {
				return m["status"] == "False" && strings.Contains(fmt.Sprint(m["message"]), "must not be negative"), fmt.Sprint(m), nil
			}
		}
		return false, fmt.Sprint(conds), nil
	})
	s.c.Create(s.ctx, t, s.pod("web").CPU("2").Obj())
	s.waitOnGroup(t, "web", cpu.Name)
	if a.Exited() {
		t.Fatal("the autoscaler exited")
	}
	if m, err := a.Metrics(s.ctx); err != nil || metricValue(m, "cluster_autoscaler_invalid_capacity_reservations") < 3 {
		t.Errorf("invalid_capacity_reservations = %v (err %v), want at least 3", metricValue(m, "cluster_autoscaler_invalid_capacity_reservations"), err)
	}
}
