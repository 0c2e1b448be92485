package estimator

import (
	"context"
	"fmt"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns        = "default"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	pcieRoot  = "resource.kubernetes.io/pcieRoot"
)

// newRunner returns a runner with the default profile. Tests log through
// the test at V(2) (the framework's per-pod logs would drown a
// binpacking); benchmarks log nowhere.
func newRunner(tb testing.TB) (*framework.Runner, context.Context) {
	tb.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background())
	if t, ok := tb.(*testing.T); ok {
		ctx = klog.NewContext(ctx, ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))))
	}
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		tb.Fatalf("framework.New: %v", err)
	}
	return r, ctx
}

func classes() []any {
	return []any{
		builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.DeviceClass("nic").Driver(nicDriver).Obj(),
	}
}

// gpuSlice is one slice of n GPUs, two per PCIe root, for node.
func gpuSlice(name, node, pool string, n int) *resourceapi.ResourceSlice {
	b := builder.ResourceSlice(name, node, gpuDriver, pool)
	for i := range n {
		b.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i/2)).Attr("index", i))
	}
	return b.Obj()
}

// gpuTemplate is a template node with one slice of n GPUs in a pool named
// after the node, 64 CPUs and 512Gi of memory.
func gpuTemplate(n int, labels map[string]string) *cloudprovider.NodeTemplate {
	node := builder.Node(template.PlaceholderNodeName).CPU("64").Memory("512Gi").Labels(labels).Obj()
	return &cloudprovider.NodeTemplate{
		Node:           node,
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice("gpus", node.Name, node.Name, n)},
	}
}

// gpuNICTemplate has 8 GPUs and 8 NICs on 4 PCIe roots, NICs numbered
// against the GPUs so that only matchAttribute pairs them right; the NICs
// are in a pool of their own name.
func gpuNICTemplate() *cloudprovider.NodeTemplate {
	t := gpuTemplate(8, nil)
	nics := builder.ResourceSlice("nics", t.Node.Name, nicDriver, "nics")
	for i := range 8 {
		nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", (7-i)/2)))
	}
	t.ResourceSlices = append(t.ResourceSlices, nics.Obj())
	return t
}

// templatePods returns n pods using one claim each from the template.
func templatePods(prefix, claimTemplate, cpu string, n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = builder.Pod(ns, fmt.Sprintf("%s-%d", prefix, i)).CPU(cpu).Memory("1Gi").
			OwnedBy("apps/v1", "ReplicaSet", prefix).ClaimFromTemplate("dev", claimTemplate).Obj()
	}
	return pods
}

// ownClaimPods returns n pods, each with its own existing claim for
// gpusPerPod GPUs (the upstream DRA scale-up benchmark's shape).
func ownClaimPods(prefix string, n int, gpusPerPod int64) ([]*v1.Pod, []any) {
	pods := make([]*v1.Pod, n)
	objs := make([]any, 0, n)
	for i := range pods {
		name := fmt.Sprintf("%s-%d", prefix, i)
		objs = append(objs, builder.Claim(ns, name+"-gpu").Request(builder.Request("gpu", "gpu").Count(gpusPerPod)).Obj())
		pods[i] = builder.Pod(ns, name).CPU("100m").OwnedBy("apps/v1", "ReplicaSet", prefix).Claim("gpu", name+"-gpu").Obj()
	}
	return pods, objs
}

// scaleFromZero is the upstream BenchmarkRunOnceScaleUpDRA scenario: an
// empty cluster, one group whose template has one slice of 8 GPUs, and
// pods each with its own one-GPU claim (4,000 pods make 500 nodes).
func scaleFromZero(tb testing.TB, pods int) (*framework.Runner, context.Context, []*v1.Pod, *cloudprovider.NodeTemplate) {
	r, ctx := newRunner(tb)
	p, objs := ownClaimPods("job", pods, 1)
	snapshottest.Load(tb, r.Snapshot(), classes()...)
	snapshottest.Load(tb, r.Snapshot(), objs...)
	return r, ctx, p, gpuTemplate(8, nil)
}

// bigCluster is a busy GPU cluster of busyNodes.
func bigCluster(tb testing.TB, nodes, claimsPerNode int) (*framework.Runner, context.Context) {
	r, ctx := newRunner(tb)
	snapshottest.Load(tb, r.Snapshot(), classes()...)
	snapshottest.Load(tb, r.Snapshot(), busyNodes(nodes, claimsPerNode)...)
	return r, ctx
}

// busyNodes returns nodes existing nodes with 8 GPUs and 16 NICs each,
// claimsPerNode (up to 24) devices of each allocated to a running pod's
// claim, GPUs first; both drivers name their pool after the node.
func busyNodes(nodes, claimsPerNode int) []any {
	var objs []any
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		nics := builder.ResourceSlice(name+"-nics", name, nicDriver, name)
		for k := range 16 {
			nics.Devices(builder.Device(fmt.Sprintf("nic-%d", k)).Attr(pcieRoot, fmt.Sprintf("pci%d", k/4)))
		}
		objs = append(objs, builder.Node(name).CPU("64").Memory("512Gi").Obj(), gpuSlice(name+"-gpus", name, name, 8), nics.Obj())
		for k := range claimsPerNode {
			class, driver, device := "gpu", gpuDriver, fmt.Sprintf("gpu-%d", k)
			if k >= 8 {
				class, driver, device = "nic", nicDriver, fmt.Sprintf("nic-%d", k-8)
			}
			pod := builder.Pod(ns, fmt.Sprintf("run-%d-%d", i, k)).CPU("1").Claim("dev", fmt.Sprintf("run-%d-%d", i, k)).Node(name).Obj()
			claim := builder.Claim(ns, pod.Name).Request(builder.Request("dev", class)).
				Allocated(name, builder.AllocatedDevice("dev", driver, name, device)).ReservedFor(pod).Obj()
			objs = append(objs, claim, pod)
		}
	}
	return objs
}

// shapedPods returns pods in distinct shapes: GPUs per pod cycle through
// 1, 2, 4 and 8, CPU and memory through 5 sizes, each shape its own
// ReplicaSet with its own claim template (which load must store).
func shapedPods(pods, shapes int) ([]*v1.Pod, []any) {
	gpus := []int64{1, 2, 4, 8}
	var out []*v1.Pod
	var objs []any
	for s := range shapes {
		tmpl := fmt.Sprintf("shape-%d", s)
		objs = append(objs, builder.ClaimTemplate(ns, tmpl).Request(builder.Request("gpu", "gpu").Count(gpus[s%len(gpus)])).Obj())
		cpu := fmt.Sprintf("%d", 1+(s/len(gpus))%5*3)
		n := pods / shapes
		if s < pods%shapes {
			n++
		}
		out = append(out, templatePods(tmpl, tmpl, cpu, n)...)
	}
	return out, objs
}

// groupTemplates returns n node groups of 8-GPU nodes that differ by a
// label (and so are distinct groups to the estimator).
func groupTemplates(n int) []TemplateGroup {
	out := make([]TemplateGroup, n)
	for i := range out {
		out[i] = TemplateGroup{Name: fmt.Sprintf("group-%d", i), Template: gpuTemplate(8, map[string]string{"example.com/group": fmt.Sprintf("g%d", i)})}
	}
	return out
}
