package scale

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// ScaleDownFlags let one pass remove what is removable, as upstream's
// scale-down benchmarks configure theirs: no unneeded time, no cooldown,
// no cap on the nodes drained or simulated.
var ScaleDownFlags = []string{
	"--scale-down-unneeded-time=0s", "--scale-down-delay-after-add=0s",
	"--max-scale-down-parallelism=100000", "--max-drain-parallelism=100000",
	"--scale-down-non-empty-candidates-count=100000", "--max-empty-bulk-delete=100000",
}

// ScaleDownDRA is upstream's RunOnceScaleDownDRA scenario (D1): nodes in
// one group, each with one slice of 10 devices, 4 pods per node each
// holding an allocated claim (made from a template, so it moves with its
// pod) on one device: 40 % of each node's devices are used, under the GPU
// threshold, and the pods of 60 % of the nodes fill the other 40 % to the
// last device. The pass must start removing exactly those 60 %.
func ScaleDownDRA(nodes int) Scenario {
	g := kwok.NodeGroupConfig{Name: "ng1", MaxSize: 10 * nodes, BootDelay: metav1.Duration{Duration: time.Hour},
		Template: kwok.TemplateConfig{
			Labels: map[string]string{"example.com/group": "ng1"},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Drivers: []kwok.DriverConfig{{Driver: GPUDriver}},
		}}
	for i := range 10 {
		g.Template.Drivers[0].Devices = append(g.Template.Drivers[0].Devices, builder.Device("gpu-"+strconv.Itoa(i)).Obj())
	}
	objs := append(Classes(), builder.ClaimTemplate(Namespace, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		objs = append(objs, Node(g, name)...)
		objs = append(objs, movablePods(name, 4, nil)...)
	}
	return Scenario{Config: &kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, Objects: objs, Flags: ScaleDownFlags,
		WantRemoved: nodes * 6 / 10}
}

// Consolidation is D2: a GPU cluster of nodes 8-GPU nodes (groups of
// 500) after a large job ended. 40 % of the nodes are still full (8
// one-GPU pods each); the other 60 % are underused (2 one-GPU pods each,
// 25 %, under the GPU threshold). Of the underused nodes, a tenth hold a
// pod a PodDisruptionBudget allows no disruption (the node stays, but
// takes pods), and a tenth hold the members of two-member gangs, one a
// node, whose PodGroup (disruptionMode All) lets them leave only
// together. Every pod takes one GPU and moves with its claim (made from
// a template), so of U underused nodes the pass must keep the fewest that
// hold their 2U pods, U/4 (the pinned tenth among them), and start
// removing the other 3U/4: gangs' nodes in pairs, no pinned node.
// nodes must be a multiple of 100 (whole tenths, gangs in pairs).
func Consolidation(nodes int) Scenario {
	const groupSize = 500
	gpu := func(name string) kwok.NodeGroupConfig {
		g := kwok.NodeGroupConfig{Name: name, MaxSize: groupSize, BootDelay: metav1.Duration{Duration: time.Hour},
			Template: kwok.TemplateConfig{
				Labels: map[string]string{"example.com/group": name},
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
					corev1.ResourcePods: resource.MustParse("110")},
				Drivers: []kwok.DriverConfig{{Driver: GPUDriver}},
			}}
		for i := range 8 {
			g.Template.Drivers[0].Devices = append(g.Template.Drivers[0].Devices, builder.Device("gpu-"+strconv.Itoa(i)).Obj())
		}
		return g
	}
	cfg := &kwok.Config{}
	objs := append(Classes(), builder.ClaimTemplate(Namespace, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "pinned"},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}})
	full := nodes * 4 / 10
	for i := range nodes {
		if i%groupSize == 0 {
			cfg.NodeGroups = append(cfg.NodeGroups, gpu(fmt.Sprintf("ng-%d", i/groupSize)))
		}
		g := cfg.NodeGroups[len(cfg.NodeGroups)-1]
		name := fmt.Sprintf("node-%d", i)
		objs = append(objs, Node(g, name)...)
		if i < full {
			objs = append(objs, movablePods(name, 8, nil)...)
			continue
		}
		var first func(*builder.PodBuilder)
		switch u := i - full; u % 10 {
		case 0:
			first = func(p *builder.PodBuilder) { p.Label("app", "pinned") }
		case 1, 2:
			pg := fmt.Sprintf("gang-%d", (u-1)/10)
			if u%10 == 1 {
				objs = append(objs, builder.PodGroup(Namespace, pg).MinCount(2).Disruption(true).Obj())
			}
			first = func(p *builder.PodBuilder) { p.PodGroup(pg) }
		}
		objs = append(objs, movablePods(name, 2, first)...)
	}
	underused := nodes - full
	return Scenario{Config: cfg, Objects: objs, Flags: ScaleDownFlags, WantRemoved: underused - underused/4}
}

// movablePods are n running pods on node, each with a one-GPU claim of
// the "one-gpu" template allocated on the node's device i, and marked
// safe to evict (no controller object is needed to move them). first,
// if not nil, changes the first pod.
func movablePods(node string, n int, first func(*builder.PodBuilder)) []runtime.Object {
	var objs []runtime.Object
	for k := range n {
		pn := fmt.Sprintf("%s-pod-%d", node, k)
		claimName := pn + "-gpu"
		b := builder.Pod(Namespace, pn).CPU("640m").Memory("5Gi").Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true").
			ClaimFromTemplate("gpu", "one-gpu").ClaimStatus("gpu", claimName).Node(node)
		if k == 0 && first != nil {
			first(b)
		}
		pod := b.Obj()
		pod.CreationTimestamp = old
		claim := builder.Claim(Namespace, claimName).Request(builder.Request("gpu", "gpu")).OwnedByPod(pod, "gpu").
			Allocated(node, builder.AllocatedDevice("gpu", GPUDriver, node, "gpu-"+strconv.Itoa(k))).ReservedFor(pod).Obj()
		objs = append(objs, pod, claim)
	}
	return objs
}
