// Package scale generates clusters for loop-level benchmarks: the kwok
// node groups, the Nodes, ResourceSlices, running pods with allocated
// claims and the pending pods, plus what one pass must decide over them,
// worked out from the layout rather than observed, so a benchmark that
// asserts it cannot silently measure a pass that did nothing.
package scale

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Drivers, attributes and the namespace of every generated object.
const (
	GPUDriver = "gpu.example.com"
	NICDriver = "nic.example.com"
	Namespace = "default"
	PCIeRoot  = "resource.kubernetes.io/pcieRoot"
	// PoolLabel says which pool of node groups a node belongs to; the
	// pending pods that must not fit existing nodes select a pool.
	PoolLabel = "example.com/pool"
	// ExistingPool is the pool of the groups the existing nodes are in.
	ExistingPool = "existing"
)

// Scenario is a cluster and what one loop pass over it must decide.
type Scenario struct {
	Config  *kwok.Config
	Objects []runtime.Object
	// WantFit is how many pending pods fit existing nodes, WantPlanned
	// how many new nodes the pass plans for the others.
	WantFit, WantPlanned int
	// Next asks a benchmark for the pass after the one that plans: the
	// planned nodes are upcoming and take the pods planned for them.
	Next bool
	// DropPending, with Next, deletes the pending pods after the first
	// pass (the job went before its nodes came): the timed pass is idle
	// while the planned nodes boot.
	DropPending bool
	// WantRemoved is how many nodes the pass starts removing.
	WantRemoved int
	// Flags are the scenario's flags beyond the benchmark's defaults.
	Flags []string
}

// Kind is what a node group's nodes offer.
type Kind int

const (
	// Plain nodes have 8 whole GPUs, two per PCIe root.
	Plain Kind = iota
	// WithNICs nodes also have 8 NICs, two per PCIe root.
	WithNICs
	// Partitionable nodes offer each of their 8 GPUs whole or as two
	// halves sharing a counter set.
	Partitionable
	kinds
)

var old = metav1.NewTime(time.Now().Add(-time.Hour))

// Group is the kwok node group name of kind on pool, 8 GPUs, 64 CPUs and
// 512Gi per node, booting for an hour so that a pass's launches stay
// upcoming.
func Group(name, pool string, kind Kind, maxSize int) kwok.NodeGroupConfig {
	gpus := kwok.DriverConfig{Driver: GPUDriver}
	var nics []resourceapi.Device
	for i := range 8 {
		root := fmt.Sprintf("pci%d", i/2)
		gpu := builder.Device("gpu-"+strconv.Itoa(i)).Attr(PCIeRoot, root).Attr("profile", "whole")
		if kind == Partitionable {
			set := "gpu-" + strconv.Itoa(i)
			gpus.SharedCounters = append(gpus.SharedCounters, builder.CounterSet(set).Counter("halves", "2").Obj())
			gpu.ConsumesCounters(set, map[string]string{"halves": "2"})
			for h := range 2 {
				gpus.Devices = append(gpus.Devices, builder.Device(fmt.Sprintf("gpu-%d-half-%d", i, h)).Attr(PCIeRoot, root).
					Attr("profile", "half").ConsumesCounters(set, map[string]string{"halves": "1"}).Obj())
			}
		}
		gpus.Devices = append(gpus.Devices, gpu.Obj())
		nics = append(nics, builder.Device("nic-"+strconv.Itoa(i)).Attr(PCIeRoot, root).Obj())
	}
	drivers := []kwok.DriverConfig{gpus}
	if kind == WithNICs {
		drivers = append(drivers, kwok.DriverConfig{Driver: NICDriver, Devices: nics})
	}
	price := 32.0
	return kwok.NodeGroupConfig{Name: name, MaxSize: maxSize, Price: &price, BootDelay: metav1.Duration{Duration: time.Hour},
		Template: kwok.TemplateConfig{
			Labels: map[string]string{PoolLabel: pool, "example.com/group": name},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Drivers: drivers,
		}}
}

// Classes are the device classes the claims use.
func Classes() []runtime.Object {
	return []runtime.Object{builder.DeviceClass("gpu").Driver(GPUDriver).Obj(), builder.DeviceClass("nic").Driver(NICDriver).Obj()}
}

// Pending marks pod as the scheduler leaves one it could not place, an
// hour ago.
func Pending(pod *corev1.Pod) *corev1.Pod {
	pod.CreationTimestamp = old
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	return pod
}

// Node returns the Node (Ready for an hour) and ResourceSlices of an
// existing node of group g.
func Node(g kwok.NodeGroupConfig, name string) []runtime.Object {
	node, slices := kwok.NodeObjects(g, name)
	node.CreationTimestamp = old
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: old}}
	objs := []runtime.Object{node}
	for _, s := range slices {
		objs = append(objs, s)
	}
	return objs
}

// ScaleFromZero is upstream's RunOnceScaleUpDRA scenario: no nodes, one
// group whose template has one slice of 8 GPUs, and pods each with its own
// one-GPU claim: pods/8 nodes.
func ScaleFromZero(pods int) Scenario {
	g := kwok.NodeGroupConfig{Name: "gpu", MaxSize: pods, BootDelay: metav1.Duration{Duration: time.Hour},
		Template: kwok.TemplateConfig{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
				corev1.ResourcePods: resource.MustParse("110")},
			Drivers: []kwok.DriverConfig{{Driver: GPUDriver}},
		}}
	for i := range 8 {
		g.Template.Drivers[0].Devices = append(g.Template.Drivers[0].Devices, builder.Device("gpu-"+strconv.Itoa(i)).Obj())
	}
	objs := Classes()
	for i := range pods {
		name := fmt.Sprintf("job-%d", i)
		objs = append(objs, builder.Claim(Namespace, name+"-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
			Pending(builder.Pod(Namespace, name).CPU("100m").OwnedBy("apps/v1", "ReplicaSet", "job").Claim("gpu", name+"-gpu").Obj()))
	}
	return Scenario{Config: &kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, Objects: objs, WantPlanned: (pods + 7) / 8}
}

// Layout sizes a busy GPU cluster (see Busy).
type Layout struct {
	Nodes, Pending int
	// Groups is the number of node groups: ExistingGroups hold the
	// existing nodes, the others are split into Pools of the same kind.
	Groups, ExistingGroups, Pools int
	// Shapes is the number of pending pod shapes; every FitEvery-th one
	// fits existing nodes, the others select a pool.
	Shapes, FitEvery int
	// Used is how many GPUs of each existing node running pods hold.
	Used int
	// Distinct makes every new group unlike every other to the filters
	// (issue 39's L2-distinct): group i of the pools offers 64+i CPUs and
	// 512+i Gi, which no pending pod's placement depends on (the GPUs
	// bind first) but every Filter reads, so no two groups share an
	// estimate.
	Distinct bool
	// Pinned adds one pending pod asking for one free GPU of the last
	// node (the one the other pods fill last) by its uuid (a debugging pod pinned to a device): the attribute every
	// device carries and nothing else reads is read, so node keys tell
	// every node apart.
	Pinned bool
	// PinnedTaken pins that pod to a GPU of node-1 a running pod holds:
	// it fits nowhere, and no new node has that GPU (a template made from
	// node-1 must not offer it).
	PinnedTaken bool
}

// L2 is the issue-16 cluster: 5,000 nodes × 8 GPUs with 20,000 allocated
// claims, 100 node groups, 10,000 pending pods in 50 shapes.
var L2 = Layout{Nodes: 5000, Pending: 10000, Groups: 100, ExistingGroups: 10, Pools: 9, Shapes: 50, FitEvery: 5, Used: 4}

// L2Distinct is L2 whose 90 new groups all differ (issue 39).
var L2Distinct = func() Layout { l := L2; l.Distinct = true; return l }()

// L4 is L2 doubled (issue 39): 10,000 nodes, 40,000 allocated claims,
// 20,000 pending pods in 100 shapes, 200 groups.
var L4 = Layout{Nodes: 10000, Pending: 20000, Groups: 200, ExistingGroups: 20, Pools: 9, Shapes: 100, FitEvery: 5, Used: 4}

// shape is one kind of pending pod.
type shape struct {
	pool  string // "" fits existing nodes
	kind  Kind
	units int64 // GPUs, or halves on a partitionable pool
}

func (l Layout) shapes() []shape {
	out := make([]shape, l.Shapes)
	nonFit := 0
	for s := range out {
		if s%l.FitEvery == 0 {
			// 1 or 2 whole GPUs: the existing nodes' free GPUs take them
			// with no waste.
			out[s] = shape{units: 1 + int64(s/l.FitEvery)%2}
			continue
		}
		k := nonFit % l.Pools
		kind := Kind(k % int(kinds))
		sizes := []int64{1, 2, 4, 8}
		if kind != Plain {
			// A GPU and a NIC per unit on one PCIe root (two each per
			// root), or halves.
			sizes = []int64{1, 2}
		}
		out[s] = shape{pool: poolName(k), kind: kind, units: sizes[(nonFit/l.Pools)%len(sizes)]}
		nonFit++
	}
	return out
}

func poolName(k int) string { return "p" + strconv.Itoa(k) }

// Busy is a cluster of l.Nodes existing nodes spread over the existing
// groups (of every kind), each with l.Used whole GPUs held by running
// pods' allocated claims, and l.Pending pending pods in l.Shapes shapes
// from claim templates. The shapes that fit take one or two whole GPUs
// and fit the existing nodes' free GPUs (as long as there are enough);
// the others select a pool of new groups, in sizes that pack new nodes
// with no waste in decreasing order (powers of two of 8 GPUs, of 4 PCIe
// roots of two, of 16 halves): the planned count is the sum over pools of
// the units divided by a node's, rounded up.
func Busy(l Layout) Scenario {
	cfg := &kwok.Config{}
	maxSize := max(l.Nodes, 1000)
	for g := range l.ExistingGroups {
		cfg.NodeGroups = append(cfg.NodeGroups, Group(fmt.Sprintf("existing-%d", g), ExistingPool, Kind(g%int(kinds)), maxSize))
	}
	perPool := (l.Groups - l.ExistingGroups) / l.Pools
	for k := range l.Pools {
		for g := range perPool {
			ng := Group(fmt.Sprintf("%s-%d", poolName(k), g), poolName(k), Kind(k%int(kinds)), maxSize)
			if l.Distinct {
				i := int64(k*perPool + g)
				ng.Template.Capacity[corev1.ResourceCPU] = *resource.NewQuantity(64+i, resource.DecimalSI)
				ng.Template.Capacity[corev1.ResourceMemory] = *resource.NewQuantity((512+i)<<30, resource.BinarySI)
			}
			cfg.NodeGroups = append(cfg.NodeGroups, ng)
		}
	}
	objs := Classes()
	pinned := ""
	for i := range l.Nodes {
		g := cfg.NodeGroups[i%l.ExistingGroups]
		name := fmt.Sprintf("node-%d", i)
		nodeObjs := Node(g, name)
		if i == l.Nodes-1 && l.Pinned {
			pinned = uuidOf(nodeObjs, "gpu-7")
		}
		if i == 1 && l.PinnedTaken {
			pinned = uuidOf(nodeObjs, "gpu-0")
		}
		objs = append(objs, nodeObjs...)
		for k := range l.Used {
			pn := fmt.Sprintf("run-%d-%d", i, k)
			pod := builder.Pod(Namespace, pn).CPU("1").Memory("1Gi").OwnedBy("apps/v1", "ReplicaSet", "run").
				Claim("gpu", pn).ClaimStatus("gpu", pn).Node(name).Obj()
			pod.Status.Phase = corev1.PodRunning
			pod.CreationTimestamp = old
			claim := builder.Claim(Namespace, pn).Request(builder.Request("gpu", "gpu")).
				Allocated(name, builder.AllocatedDevice("gpu", GPUDriver, name, "gpu-"+strconv.Itoa(k))).ReservedFor(pod).Obj()
			objs = append(objs, pod, claim)
		}
	}
	shapes := l.shapes()
	for s, sh := range shapes {
		objs = append(objs, claimTemplate(fmt.Sprintf("shape-%d", s), sh))
	}
	fit := 0
	units := map[string]int64{}
	for i := range l.Pending {
		s := i % len(shapes)
		sh := shapes[s]
		tmpl := fmt.Sprintf("shape-%d", s)
		pod := builder.Pod(Namespace, fmt.Sprintf("pend-%d", i)).CPU(strconv.FormatInt(sh.units, 10)).Memory(fmt.Sprintf("%dGi", 4*sh.units)).
			OwnedBy("apps/v1", "ReplicaSet", tmpl).ClaimFromTemplate("dev", tmpl)
		if sh.pool == "" {
			fit++
		} else {
			pod.NodeSelector(PoolLabel, sh.pool)
			units[sh.pool] += sh.units
		}
		objs = append(objs, Pending(pod.Obj()))
	}
	if l.Pinned || l.PinnedTaken {
		objs = append(objs, builder.ClaimTemplate(Namespace, "pinned").Request(builder.Request("gpu", "gpu").
			Selector(fmt.Sprintf("device.attributes[%q].uuid == %q", GPUDriver, pinned))).Obj(),
			Pending(builder.Pod(Namespace, "pinned").CPU("1").Memory("1Gi").ClaimFromTemplate("dev", "pinned").Obj()))
	}
	if l.Pinned {
		fit++
	}
	planned := 0
	for k := range l.Pools {
		perNode := int64(8)
		if Kind(k%int(kinds)) == Partitionable {
			perNode = 16
		}
		planned += int((units[poolName(k)] + perNode - 1) / perNode)
	}
	return Scenario{Config: cfg, Objects: objs, WantFit: fit, WantPlanned: planned}
}

// uuidOf is the uuid of device in a node's objects.
func uuidOf(objs []runtime.Object, device string) string {
	for _, o := range objs {
		if s, ok := o.(*resourceapi.ResourceSlice); ok {
			for _, d := range s.Spec.Devices {
				if a := d.Attributes[kwok.AttributeUUID]; d.Name == device && a.StringValue != nil {
					return *a.StringValue
				}
			}
		}
	}
	return ""
}

func claimTemplate(name string, sh shape) *resourceapi.ResourceClaimTemplate {
	t := builder.ClaimTemplate(Namespace, name)
	switch sh.kind {
	case WithNICs:
		t.Request(builder.Request("gpu", "gpu").Count(sh.units).Selector(profileIs("whole")), builder.Request("nic", "nic").Count(sh.units)).
			MatchAttribute(PCIeRoot, "gpu", "nic")
	case Partitionable:
		t.Request(builder.Request("gpu", "gpu").Count(sh.units).Selector(profileIs("half")))
	default:
		t.Request(builder.Request("gpu", "gpu").Count(sh.units).Selector(profileIs("whole")))
	}
	return t.Obj()
}

func profileIs(p string) string {
	return fmt.Sprintf("device.attributes[%q].profile == %q", GPUDriver, p)
}
