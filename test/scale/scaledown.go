package scale

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		objs = append(objs, movablePods(name, 4)...)
	}
	return Scenario{Config: &kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, Objects: objs, Flags: ScaleDownFlags,
		WantRemoved: nodes * 6 / 10}
}

// movablePods are n running pods on node, each with a one-GPU claim of
// the "one-gpu" template allocated on the node's device i, and marked
// safe to evict (no controller object is needed to move them).
func movablePods(node string, n int) []runtime.Object {
	var objs []runtime.Object
	for k := range n {
		pn := fmt.Sprintf("%s-pod-%d", node, k)
		claimName := pn + "-gpu"
		pod := builder.Pod(Namespace, pn).CPU("640m").Memory("5Gi").Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true").
			ClaimFromTemplate("gpu", "one-gpu").ClaimStatus("gpu", claimName).Node(node).Obj()
		pod.CreationTimestamp = old
		claim := builder.Claim(Namespace, claimName).Request(builder.Request("gpu", "gpu")).OwnedByPod(pod, "gpu").
			Allocated(node, builder.AllocatedDevice("gpu", GPUDriver, node, "gpu-"+strconv.Itoa(k))).ReservedFor(pod).Obj()
		objs = append(objs, pod, claim)
	}
	return objs
}
