package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/explain"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The agreement suite: the pods real platforms run (volumes, affinity
// across namespaces, priorities). For each case, explain is asked about
// every pending pod before the autoscaler acts; then the autoscaler runs,
// every pod must run, each group must have grown by exactly the nodes the
// scheduler then used, each pod must land in the group explain named (or
// on a node that was there, when explain named none), and no pod may get
// a SchedulerDisagreement event.

// zonalGroup is a 4-CPU group in zone.
func (s *scenario) zonalGroup(name, zone string) kwok.NodeGroupConfig {
	g := s.cpuGroup(name, 4)
	g.Template.Labels[corev1.LabelTopologyZone] = zone
	return g
}

// agree creates pods (the objects they need exist), lets explain judge
// each, starts the autoscaler and checks that the loop did what explain
// said and the scheduler then used exactly the nodes added. want is the
// number of nodes each group must have at the end (nodes created by the
// test count). It returns explain's reports by pod name.
func (s *scenario) agree(t *testing.T, cfg kwok.Config, pods []*corev1.Pod, want map[string]int) map[string]*explain.Report {
	t.Helper()
	return s.agreeWith(t, cfg, pods, want, false)
}

// agreeSpread is agree for replicas the scheduler may swap: the groups
// explain names and those the pods land in must be the same multiset.
func (s *scenario) agreeSpread(t *testing.T, cfg kwok.Config, pods []*corev1.Pod, want map[string]int) {
	t.Helper()
	s.agreeWith(t, cfg, pods, want, true)
}

func (s *scenario) agreeWith(t *testing.T, cfg kwok.Config, pods []*corev1.Pod, want map[string]int, interchangeable bool) map[string]*explain.Report {
	t.Helper()
	for _, p := range pods {
		s.c.Create(s.ctx, t, p)
	}
	for _, p := range pods {
		s.waitUnschedulable(t, p.Name)
	}
	explained, reports := map[string]string{}, map[string]*explain.Report{}
	for _, p := range pods {
		r := s.explainJSON(t, cfg, p.Name)
		reports[p.Name] = r
		var groups []string
		for _, g := range r.NodeGroups {
			if g.Verdict == explain.VerdictScaleUp {
				groups = append(groups, g.NodeGroup)
			}
		}
		sort.Strings(groups)
		explained[p.Name] = strings.Join(groups, ",")
		t.Logf("explain %s: %s (groups: %q)", p.Name, r.Summary, explained[p.Name])
	}
	s.c.StartAutoscaler(t, cfg)
	framework.Eventually(s.ctx, t, 2*time.Minute, "every pod bound", func(ctx context.Context) (bool, string, error) {
		var seen []string
		for _, p := range pods {
			got, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if got.Spec.NodeName == "" {
				seen = append(seen, describePod(got))
			}
		}
		return len(seen) == 0, strings.Join(seen, "; "), nil
	})
	for group, n := range want {
		nodes, err := s.groupNodes(s.ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != n {
			t.Errorf("group %s has %d nodes, want %d", group, len(nodes), n)
		}
	}
	var said, landed []string
	for _, p := range pods {
		got, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, err := s.c.Client.CoreV1().Nodes().Get(s.ctx, got.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		group := ""
		if !strings.HasSuffix(node.Name, "-existing") { // existingNode's names
			group = node.Labels[kwok.LabelNodeGroup]
		}
		said, landed = append(said, explained[p.Name]), append(landed, group)
		if !interchangeable && group != explained[p.Name] {
			t.Errorf("%s runs on %s (new node of group %q); explain said it scales up %q", p.Name, node.Name, group, explained[p.Name])
		}
	}
	sort.Strings(said)
	sort.Strings(landed)
	if interchangeable && strings.Join(said, " ") != strings.Join(landed, " ") {
		t.Errorf("the pods landed on new nodes of %q; explain said %q", landed, said)
	}
	for _, p := range pods {
		if msgs, err := s.events(s.ctx, p.Name, disagree.ReasonSchedulerDisagreement); err != nil || len(msgs) > 0 {
			t.Errorf("%s: scheduler disagreement events %q (%v)", p.Name, msgs, err)
		}
	}
	return reports
}

// verdictOf is explain's verdict for group, or nil.
func verdictOf(r *explain.Report, group string) *explain.GroupVerdict {
	for i := range r.NodeGroups {
		if r.NodeGroups[i].NodeGroup == group {
			return &r.NodeGroups[i]
		}
	}
	return nil
}

// waitUnschedulable waits until the scheduler has tried the pod and
// found it no node.
func (s *scenario) waitUnschedulable(t *testing.T, pod string) {
	t.Helper()
	framework.Eventually(s.ctx, t, time.Minute, pod+" unschedulable", func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, "", nil
			}
		}
		return false, describePod(p), nil
	})
}

// waitBound waits until the claim is bound to its volume.
func (s *scenario) waitBound(t *testing.T, claim string) {
	t.Helper()
	framework.Eventually(s.ctx, t, time.Minute, claim+" bound", func(ctx context.Context) (bool, string, error) {
		c, err := s.c.Client.CoreV1().PersistentVolumeClaims(s.ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase), nil
	})
}

// A pod mounting a bound ReadWriteMany claim (model weights on NFS) gets
// a node: the volume plugins read the real claim and volume.
func TestAgreeBoundVolumeClaim(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 4)
	s.c.Create(s.ctx, t, builder.PV(s.ns+"-weights").BoundTo(s.ns, "weights").Obj(), builder.PVC(s.ns, "weights", s.ns+"-weights"))
	s.waitBound(t, "weights")
	pods := []*corev1.Pod{
		s.pod("infer-0").CPU("3").Volume("weights", "weights").Obj(),
		s.pod("infer-1").CPU("3").Volume("weights", "weights").Obj(),
	}
	s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}, pods, map[string]int{cpu.Name: 2})
}

// A volume in zone b keeps its pod in zone b: the group of zone b grows,
// the group of zone a (listed first, as cheap) does not.
func TestAgreeZonalVolume(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	a, b := s.zonalGroup("zone-a", "a"), s.zonalGroup("zone-b", "b")
	s.c.Create(s.ctx, t, builder.PV(s.ns+"-data").BoundTo(s.ns, "data").InZone("b").Obj(), builder.PVC(s.ns, "data", s.ns+"-data"))
	s.waitBound(t, "data")
	pods := []*corev1.Pod{s.pod("train").CPU("2").Volume("data", "data").Obj()}
	s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}}, pods, map[string]int{a.Name: 0, b.Name: 1})
}

// Required pod affinity with a namespaceSelector: the pod goes to the
// zone where the selected namespace's database runs, which only works if
// the simulation sees the namespaces' labels.
func TestAgreeAffinityAcrossNamespaces(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	a, b := s.zonalGroup("zone-a", "a"), s.zonalGroup("zone-b", "b")
	patch := fmt.Sprintf(`{"metadata":{"labels":{"team-%s":"ml"}}}`, s.ns)
	if _, err := s.c.Client.CoreV1().Namespaces().Patch(s.ctx, s.ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	node := s.existingNode(t, b, "existing", nil)
	db := s.pod("db").CPU("3").Label("app", "db").Node(node).Obj()
	s.c.Create(s.ctx, t, db)
	pods := []*corev1.Pod{s.pod("feature-store").CPU("3").
		RequiredAffinity(corev1.LabelTopologyZone, "app", "db", map[string]string{"team-" + s.ns: "ml"}).Obj()}
	s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}}, pods, map[string]int{a.Name: 0, b.Name: 2})
}

// A pod the scheduler nominated for a node, where it preempts a
// lower-priority pod that takes its time to go, waits for that node: no
// node is added for it while the victim terminates, and it runs there.
func TestAgreeNominatedPodWaitsForPreemption(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 4)
	low := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: s.ns + "-low"}, Value: 10}
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: s.ns + "-high"}, Value: 1000}
	s.c.Create(s.ctx, t, low, high)
	node := s.existingNode(t, cpu, "existing", nil)
	victim := s.pod("batch").CPU("3").Priority(low.Value).PriorityClass(low.Name).Node(node).Obj()
	victim.Finalizers = []string{holdFinalizer} // terminates only when released
	s.c.Create(s.ctx, t, victim)
	release := func() {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		_, _ = s.c.Client.CoreV1().Pods(s.ns).Patch(context.Background(), "batch", types.MergePatchType, patch, metav1.PatchOptions{})
	}
	t.Cleanup(release)
	s.c.Create(s.ctx, t, s.pod("serve").CPU("3").Priority(high.Value).PriorityClass(high.Name).Obj())
	framework.Eventually(s.ctx, t, time.Minute, "serve nominated for "+node, func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Status.NominatedNodeName == node, describePod(p), nil
	})
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}
	if r := s.explainJSON(t, cfg, "serve"); r.State != "Nominated" || r.Node != node {
		t.Errorf("explain says %s on %q (%s), want Nominated on %s", r.State, r.Node, r.Summary, node)
	}
	s.c.StartAutoscaler(t, cfg)
	framework.Consistently(s.ctx, t, 10*time.Second, "no node added while the victim terminates", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, cpu.Name)
		return len(nodes) == 1, fmt.Sprintf("%d nodes", len(nodes)), err
	})
	release()
	framework.Eventually(s.ctx, t, time.Minute, "serve runs on "+node, func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == node, describePod(p), nil
	})
	if nodes, _ := s.groupNodes(s.ctx, cpu.Name); len(nodes) != 1 {
		t.Errorf("group has %d nodes, want the 1 that was there", len(nodes))
	}
}

// holdFinalizer keeps a deleted pod terminating until the test releases it.
const holdFinalizer = "e2e.dra-autoscaler.io/hold"

// provisioner is a stand-in for a topology-aware CSI provisioner: for each
// claim of its class the scheduler has picked a node for, it creates a
// volume in that node's zone, bound to the claim, as an external
// provisioner would.
func (s *scenario) provisioner(t *testing.T, class string) {
	t.Helper()
	ctx, cancel := context.WithCancel(s.ctx)
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			claims, err := s.c.Client.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range claims.Items {
					s.provision(ctx, &claims.Items[i], class)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}

func (s *scenario) provision(ctx context.Context, c *corev1.PersistentVolumeClaim, class string) {
	node := c.Annotations["volume.kubernetes.io/selected-node"]
	if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != class || node == "" || c.Spec.VolumeName != "" {
		return
	}
	n, err := s.c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return
	}
	pv := builder.PV(s.ns+"-"+c.Name).BoundTo(s.ns, c.Name).InZone(n.Labels[corev1.LabelTopologyZone]).Obj()
	pv.Spec.StorageClassName = class
	pv.Spec.AccessModes = c.Spec.AccessModes
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	if _, err := s.c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err == nil {
		name := pv.Name
		s.cleanupVolumes = append(s.cleanupVolumes, name)
	}
}

// A claim of a WaitForFirstConsumer class whose provisioner serves only
// zone b is simulated as the scheduler does: only zone b's group can
// provision it, so only that group grows, and the pod runs there on the
// volume provisioned for it.
func TestAgreeWaitForFirstConsumerClaim(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	a, b := s.zonalGroup("zone-a", "a"), s.zonalGroup("zone-b", "b")
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: s.ns + "-zonal"}, Provisioner: "zonal.csi.example.com",
		VolumeBindingMode: &wffc, AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"b"}}}}}}
	s.c.Create(s.ctx, t, class)
	claim := builder.PVC(s.ns, "scratch", "")
	claim.Spec.StorageClassName = &class.Name
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	s.c.Create(s.ctx, t, claim)
	s.provisioner(t, class.Name)
	t.Cleanup(func() {
		for _, name := range s.cleanupVolumes {
			_ = s.c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	pods := []*corev1.Pod{s.pod("finetune").CPU("2").Volume("scratch", "scratch").Obj()}
	s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}}, pods, map[string]int{a.Name: 0, b.Name: 1})
}

// A DaemonSet whose pods each claim one GPU runs on every GPU node: the
// simulation counts its claim on each new node, so a pod claiming 8 GPUs
// goes to the 16-GPU group, not the 8-GPU one where the agent's GPU
// leaves 7.
func TestAgreeDaemonSetClaimOnEveryGPUNode(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	small, big := s.gpuGroup("gpu8", 4, 8), s.gpuGroup("gpu16", 4, 16)
	s.c.Create(s.ctx, t,
		builder.ClaimTemplate(s.ns, "one-gpu").Request(builder.Request("gpu", s.ns+"-gpu")).Obj(),
		builder.ClaimTemplate(s.ns, "eight-gpus").Request(builder.Request("gpu", s.ns+"-gpu").Count(8)).Obj())
	agent := s.pod("gpu-agent").CPU("100m").ClaimFromTemplate("gpu", "one-gpu").Obj()
	labels := map[string]string{"app": "gpu-agent"}
	s.c.Create(s.ctx, t, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "gpu-agent"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: agent.Spec},
		},
	})
	pods := []*corev1.Pod{s.pod("train").CPU("4").ClaimFromTemplate("gpus", "eight-gpus").Obj()}
	s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{small, big}}, pods, map[string]int{small.Name: 0, big.Name: 1})
	framework.Eventually(s.ctx, t, time.Minute, "the agent runs on the new node", func(ctx context.Context) (bool, string, error) {
		list, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gpu-agent"})
		if err != nil {
			return false, "", err
		}
		running := 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName != "" {
				running++
			}
		}
		return running == 1, fmt.Sprintf("%d agent pods bound of %d", running, len(list.Items)), nil
	})
}

// Two replicas spread across zones (maxSkew 1, DoNotSchedule) while each
// zone's only node is full: one new node in each zone, as the scheduler
// then places them, not one node holding both.
func TestAgreeTopologySpreadAcrossZones(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	a, b := s.zonalGroup("zone-a", "a"), s.zonalGroup("zone-b", "b")
	for _, g := range []kwok.NodeGroupConfig{a, b} {
		node := s.existingNode(t, g, "existing", nil)
		s.c.Create(s.ctx, t, s.pod("busy-"+g.Template.Labels[corev1.LabelTopologyZone]).CPU("3").Node(node).Obj())
	}
	spread := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		return p
	}
	pods := []*corev1.Pod{
		spread(s.pod("web-0").CPU("2").Label("app", "web").Obj()),
		spread(s.pod("web-1").CPU("2").Label("app", "web").Obj()),
	}
	s.agreeSpread(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a, b}}, pods, map[string]int{a.Name: 2, b.Name: 2})
}

// An expendable batch pod (priority below --expendable-pods-priority-cutoff)
// on the only node does not block a fit: no node is added for the serving
// pod, which the scheduler places there by preempting the batch pod; and
// the batch pod's replacement, pending now, triggers no scale-up either
// (explain says so before the autoscaler acts).
func TestAgreeExpendablePodDoesNotBlockAFit(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	cpu := s.cpuGroup("cpu", 4)
	expendable := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: s.ns + "-expendable"}, Value: -100}
	s.c.Create(s.ctx, t, expendable)
	node := s.existingNode(t, cpu, "existing", nil)
	batch := s.pod("batch").CPU("3").Label("app", "batch").Priority(expendable.Value).PriorityClass(expendable.Name).Obj()
	one := int32(1)
	s.c.Create(s.ctx, t, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "batch"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: batch.Labels}, Spec: batch.Spec}},
	})
	batchPods := func(ctx context.Context) (running, pending []string, err error) {
		list, err := s.c.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=batch"})
		if err != nil {
			return nil, nil, err
		}
		for _, p := range list.Items {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Spec.NodeName != "":
				running = append(running, p.Name)
			default:
				pending = append(pending, p.Name)
			}
		}
		return running, pending, nil
	}
	framework.Eventually(s.ctx, t, time.Minute, "the batch pod runs on "+node, func(ctx context.Context) (bool, string, error) {
		running, pending, err := batchPods(ctx)
		return len(running) == 1, fmt.Sprintf("running %q, pending %q", running, pending), err
	})
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{cpu}}
	s.c.StartAutoscaler(t, cfg)
	s.c.Create(s.ctx, t, s.pod("serve").CPU("3").Obj())
	framework.Eventually(s.ctx, t, time.Minute, "serve runs on "+node, func(ctx context.Context) (bool, string, error) {
		p, err := s.c.Client.CoreV1().Pods(s.ns).Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == node, describePod(p), nil
	})
	var replacement string
	framework.Eventually(s.ctx, t, time.Minute, "the batch pod's replacement pending", func(ctx context.Context) (bool, string, error) {
		running, pending, err := batchPods(ctx)
		if len(pending) == 1 {
			replacement = pending[0]
		}
		return len(running) == 0 && len(pending) == 1, fmt.Sprintf("running %q, pending %q", running, pending), err
	})
	s.waitUnschedulable(t, replacement)
	r := s.explainJSON(t, cfg, replacement)
	t.Logf("explain %s: %s %s", replacement, r.State, r.Summary)
	if r.State != "Ignored" || !strings.Contains(r.Summary, "expendable-pods-priority-cutoff") {
		t.Errorf("explain %s: %s, %q; want Ignored below the expendable cutoff", replacement, r.State, r.Summary)
	}
	for _, g := range r.NodeGroups {
		if g.Verdict == explain.VerdictScaleUp {
			t.Errorf("explain scales %s up for the expendable pod %s: %+v", g.NodeGroup, replacement, g)
		}
	}
	framework.Consistently(s.ctx, t, 10*time.Second, "no node added for either pod", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, cpu.Name)
		return len(nodes) == 1, fmt.Sprintf("%d nodes", len(nodes)), err
	})
	for _, p := range []string{"serve", replacement} {
		if msgs, err := s.events(s.ctx, p, disagree.ReasonSchedulerDisagreement); err != nil || len(msgs) > 0 {
			t.Errorf("%s: scheduler disagreement events %q (%v)", p, msgs, err)
		}
	}
}

// A group whose nodes attach at most one volume of a CSI driver (their
// CSINode says so, as a cloud's block-storage driver does): two pods, each
// with its own volume of that driver, need two new nodes though one would
// hold both by CPU. The simulation judges new nodes by their template's
// CSINode, so it asks for both at once, and the scheduler uses both.
func TestAgreeCSIVolumeLimit(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	const driver = "block.csi.example.com"
	g := s.cpuGroup("csi", 4)
	g.Template.CSIDrivers = []kwok.CSIDriverConfig{{Name: driver, MaxVolumes: ptr.To[int32](1)}}
	var pods []*corev1.Pod
	for i := range 2 {
		claim := fmt.Sprintf("data-%d", i)
		pv := s.ns + "-" + claim
		s.c.Create(s.ctx, t, builder.PV(pv).CSI(driver).BoundTo(s.ns, claim).Obj(), withAccess(builder.PVC(s.ns, claim, pv), corev1.ReadWriteOnce))
		s.waitBound(t, claim)
		pods = append(pods, s.pod(fmt.Sprintf("train-%d", i)).CPU("1").Volume("data", claim).Obj())
	}
	reports := s.agree(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, pods, map[string]int{g.Name: 2})
	if v := verdictOf(reports["train-0"], g.Name); v == nil || !strings.Contains(v.Message, "+2 node(s)") {
		t.Errorf("explain for %s: %+v, want one scale-up of 2 nodes", g.Name, v)
	}
}

func withAccess(c *corev1.PersistentVolumeClaim, mode corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
	return c
}

// A group that cannot satisfy a pod's volume says so in a user's words,
// in explain and in the pod's event: a bound volume in another zone, a
// class that provisions only in another zone.
func TestExplainVolumeElsewhere(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	a := s.zonalGroup("zone-a", "a")
	s.c.Create(s.ctx, t, builder.PV(s.ns+"-data").BoundTo(s.ns, "data").InZone("b").Obj(), builder.PVC(s.ns, "data", s.ns+"-data"))
	s.waitBound(t, "data")
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: s.ns + "-only-b"}, Provisioner: "zonal.csi.example.com",
		VolumeBindingMode: &wffc, AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"b"}}}}}}
	scratch := withAccess(builder.PVC(s.ns, "scratch", ""), corev1.ReadWriteOnce)
	scratch.Spec.StorageClassName = &class.Name
	s.c.Create(s.ctx, t, class, scratch)
	cfg := kwok.Config{NodeGroups: []kwok.NodeGroupConfig{a}}
	s.c.StartAutoscaler(t, cfg)
	for _, tc := range []struct{ pod, claim, want string }{
		{"train", "data", fmt.Sprintf("PV %s-data (claim data) is in zone b; the node is in zone a", s.ns)},
		{"finetune", "scratch", fmt.Sprintf("StorageClass %s (claim scratch) provisions only in zone b; the node is in zone a", class.Name)},
	} {
		s.c.Create(s.ctx, t, s.pod(tc.pod).CPU("1").Volume("v", tc.claim).Obj())
		s.waitUnschedulable(t, tc.pod)
		s.waitEvent(t, tc.pod, "NotTriggerScaleUp", time.Minute, tc.want)
		r := s.explainJSON(t, cfg, tc.pod)
		if v := verdictOf(r, a.Name); v == nil || v.Verdict != explain.VerdictCannotHelp || !strings.Contains(v.Message, tc.want) {
			t.Errorf("explain %s for %s: %+v, want cannot-help saying %q", tc.pod, a.Name, v, tc.want)
		}
	}
	if nodes, _ := s.groupNodes(s.ctx, a.Name); len(nodes) != 0 {
		t.Errorf("%d nodes added to %s", len(nodes), a.Name)
	}
}
