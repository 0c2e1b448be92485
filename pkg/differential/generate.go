// Package differential generates clusters from a seed, of the shapes real
// GPU platforms have, for the differential test: every pass over a
// generated cluster must decide alike with the simulation's shortcuts on
// and with every one off (docs/design/caches.md).
//
// What is generated: node groups with templates (labels, taints, CPU and
// memory, whole GPUs with NICs on their PCIe roots, partitionable GPUs
// drawing on shared counters, GPUs with consumable memory), existing
// nodes of each group (some labelled apart from their template, some
// running pods, evictable, some with allocated claims: scale-down
// simulates moving them), pending pods by app (CPU
// only, claims from templates or one claim the app's pods share, node
// selectors, required and preferred node affinity, tolerations,
// required and preferred pod anti-affinity, required pod affinity, hard
// and soft topology spread, Services for default spreading, gangs whose
// PodGroup may keep them in one zone), PVCs bound to NFS volumes, and a
// scheduler profile with an addedAffinity and hard default spread
// constraints.
//
// Not generated yet: Workloads (PodGroups stand alone), capacity
// reservations and ProvisioningRequests (the fake provider has none),
// CapacityBuffers, DeviceTaintRules, extended resources backed by DRA,
// allocated claims on shared (consumable) devices, running gang members.
package differential

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	// Namespace holds every namespaced object.
	Namespace = "ns"
	gpuDriver = "gpu.example.com"
	nicDriver = "nic.example.com"
	pcieRoot  = "resource.kubernetes.io/pcieRoot"
	zoneKey   = corev1.LabelTopologyZone
	poolKey   = "example.com/pool"
	gpuTaint  = "example.com/gpu"
)

// FeatureGates are the simulated scheduler's, as the e2e control plane
// runs them: gangs need GenericWorkload (and a PodGroup's topology,
// TopologyAwareWorkloadScheduling).
const FeatureGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"

// Now is the clock of the generated cluster: pending pods have waited a
// minute by then.
var Now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// Cluster is one generated cluster.
type Cluster struct {
	Seed   uint64
	Groups []GroupSpec
	// Objects are the cluster's API objects (nodes, pods, DRA objects,
	// volumes, Services), in the order they are created.
	Objects []runtime.Object
	// SchedulerConfig is a KubeSchedulerConfiguration whose one profile
	// the simulation runs; "" for the default one.
	SchedulerConfig string
	// summary says what was generated, one line per group, app, node.
	summary []string
}

// GroupSpec is a node group: its template and its existing nodes, whose
// providerIDs are the group's instances in order.
type GroupSpec struct {
	ID       string
	Max      int
	Template *cloudprovider.NodeTemplate
	Nodes    int
}

// Provider returns a fresh fake provider over the cluster's groups, their
// instances running and their targets their sizes.
func (c *Cluster) Provider() *fakeprovider.Provider {
	groups := make([]*fakeprovider.FakeNodeGroup, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = fakeprovider.NewGroup(g.ID, 0, g.Max).WithTemplate(g.Template, nil)
		for range g.Nodes {
			groups[i].AddInstance(cloudprovider.InstanceRunning, nil)
		}
		groups[i].SetTarget(g.Nodes)
	}
	return fakeprovider.New(groups...)
}

// Fresh returns copies of the objects, for one more fake clientset.
func (c *Cluster) Fresh() []runtime.Object {
	out := make([]runtime.Object, len(c.Objects))
	for i, o := range c.Objects {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// String is a short dump of what was generated.
func (c *Cluster) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster of seed %d:\n", c.Seed)
	for _, l := range c.summary {
		b.WriteString("  " + l + "\n")
	}
	if c.SchedulerConfig != "" {
		b.WriteString("  scheduler config:\n    " + strings.ReplaceAll(strings.TrimSpace(c.SchedulerConfig), "\n", "\n    ") + "\n")
	}
	return b.String()
}

// gen is the state of one generation.
type gen struct {
	r *rand.Rand
	c *Cluster
	// apps are the app labels in use, for affinity and spreading that
	// refer to other apps.
	apps []string
	// nodes are the existing nodes, with their taints.
	nodes []*corev1.Node
}

func (g *gen) add(objs ...runtime.Object) { g.c.Objects = append(g.c.Objects, objs...) }

func (g *gen) note(format string, args ...any) {
	g.c.summary = append(g.c.summary, fmt.Sprintf(format, args...))
}

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// Generate builds the cluster of seed.
func Generate(seed uint64) *Cluster {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), c: &Cluster{Seed: seed}}
	g.add(builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), builder.DeviceClass("nic").Driver(nicDriver).Obj())
	g.claimTemplates()
	for i := range 2 + g.r.IntN(3) {
		g.group(i)
	}
	for i := range 2 + g.r.IntN(5) {
		g.app(i)
	}
	g.running()
	g.profile()
	g.pinned()
	return g.c
}

// pinned adds, to some clusters, a pod whose claim asks for one GPU by
// its uuid, an attribute every node's devices carry and nothing else
// reads: node keys must then tell the nodes apart by it. Drawn after
// everything else, so that the rest of a seed's cluster is what it was.
func (g *gen) pinned() {
	if len(g.nodes) == 0 || !g.chance(0.3) {
		return
	}
	n := g.nodes[g.r.IntN(len(g.nodes))]
	uuid := n.Name + "/gpu-0" // mig and shared nodes have one too
	if strings.HasSuffix(n.Labels["group"], "-"+kindCPU) {
		uuid = "no-such-gpu"
	}
	g.add(builder.ClaimTemplate(Namespace, "pinned").Request(builder.Request("gpu", "gpu").
		Selector(fmt.Sprintf("device.attributes[%q].uuid == %q", gpuDriver, uuid))).Obj())
	p := builder.Pod(Namespace, "pinned").CPU("100m").Memory("256Mi").Toleration(gpuTaint, "", corev1.TaintEffectNoSchedule).
		ClaimFromTemplate("gpu", "pinned").Obj()
	p.UID = types.UID("pod-" + p.Name)
	p.CreationTimestamp = metav1.NewTime(Now.Add(-time.Minute))
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
	g.add(p)
	g.note("pod pinned: a GPU by uuid %s", uuid)
}

// withUUIDs gives each device of an existing node's slices a uuid, as
// real drivers publish (templates' devices have none).
func withUUIDs(node string, slices []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	for _, s := range slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			d.Attributes["uuid"] = resourceapi.DeviceAttribute{StringValue: ptr.To(node + "/" + d.Name)}
		}
	}
	return slices
}

// kinds of node groups, by their devices.
const (
	kindCPU    = "cpu"
	kindGPU    = "gpu"    // whole GPUs, NICs on their PCIe roots with some
	kindMIG    = "mig"    // partitionable GPUs: whole or seven 1g slices
	kindShared = "shared" // GPUs whose memory claims share
)

func (g *gen) claimTemplates() {
	req := func() *builder.RequestBuilder { return builder.Request("gpu", "gpu") }
	profile := func(p string) string { return fmt.Sprintf("device.attributes[%q].profile == %q", gpuDriver, p) }
	g.add(
		builder.ClaimTemplate(Namespace, "one-gpu").Request(req()).Obj(),
		builder.ClaimTemplate(Namespace, "two-gpu").Request(req().Count(2)).Obj(),
		builder.ClaimTemplate(Namespace, "h100").Request(req().Selector(fmt.Sprintf("device.attributes[%q].model == \"h100\"", gpuDriver))).Obj(),
		builder.ClaimTemplate(Namespace, "gpu-nic").Request(req(), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj(),
		builder.ClaimTemplate(Namespace, "mig-1g").Request(req().Selector(profile("1g"))).Obj(),
		builder.ClaimTemplate(Namespace, "mig-2x1g").Request(req().Selector(profile("1g")).Count(2)).Obj(),
		builder.ClaimTemplate(Namespace, "whole-or-1g").Request(builder.FirstAvailable("gpu",
			builder.Request("whole", "gpu").Selector(profile("whole")), builder.Request("slice", "gpu").Selector(profile("1g")))).Obj(),
		builder.ClaimTemplate(Namespace, "mem20").Request(req().Selector(profile("shared")).Capacity("memory", "20Gi")).Obj(),
	)
}

// group adds node group i: its template and 0 to 3 existing nodes.
func (g *gen) group(i int) {
	kind := pick(g, kindCPU, kindGPU, kindGPU, kindMIG, kindShared)
	id := fmt.Sprintf("g%d-%s", i, kind)
	labels := map[string]string{"group": id, zoneKey: pick(g, "z1", "z2"), poolKey: pick(g, "a", "b", "c")}
	cpu, mem := pick(g, "4", "8", "16", "32"), pick(g, "16Gi", "64Gi", "256Gi")
	model := pick(g, "a100", "h100")
	gpus := pick(g, 2, 4)
	nics := kind == kindGPU && g.chance(0.5)
	tainted := kind != kindCPU && g.chance(0.5)
	node := func(name string) *builder.NodeBuilder {
		b := builder.Node(name).CPU(cpu).Memory(mem).Labels(labels)
		if tainted {
			b = b.Taint(gpuTaint, "true", corev1.TaintEffectNoSchedule)
		}
		return b
	}
	tmpl := &cloudprovider.NodeTemplate{Node: node(template.PlaceholderNodeName).Obj(),
		ResourceSlices: g.slices(kind, template.PlaceholderNodeName, model, gpus, nics)}
	grp := GroupSpec{ID: id, Max: 3 + g.r.IntN(6), Template: tmpl, Nodes: g.r.IntN(4)}
	g.c.Groups = append(g.c.Groups, grp)
	g.note("group %s: max %d, %s CPU %s, labels %v, tainted %v, %d %s GPUs, NICs %v; %d nodes", id, grp.Max, cpu, mem, labels, tainted, gpus, model, nics, grp.Nodes)
	for n := range grp.Nodes {
		name := fmt.Sprintf("%s-%d", id, n)
		b := node(name)
		// Nodes of one group that differ only by a label: a zone the
		// group spans, a pool an operator moved the node to.
		if g.chance(0.3) {
			b = b.Label(zoneKey, pick(g, "z1", "z2"))
		}
		if g.chance(0.4) {
			b = b.Label(poolKey, pick(g, "a", "b", "c"))
		}
		// Seen usable by an autoscaler before: its mark is no write
		// racing the second pass.
		obj := b.Annotation(safety.UsableAnnotation, Now.Add(-time.Hour).Format(time.RFC3339)).Obj()
		obj.Spec.ProviderID = fmt.Sprintf("fake://%s/%d", id, n)
		g.nodes = append(g.nodes, obj)
		g.add(obj)
		for _, s := range withUUIDs(name, g.slices(kind, name, model, gpus, nics)) {
			g.add(s)
		}
		g.note("  node %s: zone %s pool %s", name, obj.Labels[zoneKey], obj.Labels[poolKey])
	}
}

// slices are the ResourceSlices of a node of kind (named node).
func (g *gen) slices(kind, node, model string, gpus int, nics bool) []*resourceapi.ResourceSlice {
	dev := func(name, profile string) *builder.DeviceBuilder {
		return builder.Device(name).Attr("model", model).Attr("profile", profile)
	}
	switch kind {
	case kindGPU:
		s := builder.ResourceSlice(node+"-gpus", node, gpuDriver, node)
		n := builder.ResourceSlice(node+"-nics", node, nicDriver, node)
		for i := range gpus {
			s.Devices(dev(fmt.Sprintf("gpu-%d", i), "whole").Attr(pcieRoot, fmt.Sprintf("pci-%d", i/2)))
			if i%2 == 0 {
				n.Devices(builder.Device(fmt.Sprintf("nic-%d", i/2)).Attr(pcieRoot, fmt.Sprintf("pci-%d", i/2)))
			}
		}
		if nics {
			return []*resourceapi.ResourceSlice{s.Obj(), n.Obj()}
		}
		return []*resourceapi.ResourceSlice{s.Obj()}
	case kindMIG:
		counters := builder.ResourceSlice(node+"-counters", node, gpuDriver, node).Pool(1, 2)
		devices := builder.ResourceSlice(node+"-devices", node, gpuDriver, node).Pool(1, 2)
		for i := range gpus / 2 {
			set := fmt.Sprintf("gpu-%d", i)
			counters.SharedCounters(builder.CounterSet(set).Counter("slices", "7"))
			devices.Devices(dev(set, "whole").ConsumesCounters(set, map[string]string{"slices": "7"}))
			for k := range 7 {
				devices.Devices(dev(fmt.Sprintf("%s-1g-%d", set, k), "1g").ConsumesCounters(set, map[string]string{"slices": "1"}))
			}
		}
		return []*resourceapi.ResourceSlice{counters.Obj(), devices.Obj()}
	case kindShared:
		s := builder.ResourceSlice(node+"-gpus", node, gpuDriver, node)
		for i := range gpus / 2 {
			s.Devices(dev(fmt.Sprintf("gpu-%d", i), "shared").AllowMultipleAllocations().CapacityPolicy("memory", "80Gi", "10Gi", "10Gi"))
		}
		return []*resourceapi.ResourceSlice{s.Obj()}
	}
	return nil
}

// app adds app i's pending pods: 1 to 4 replicas of one spec.
func (g *gen) app(i int) {
	name := fmt.Sprintf("app%d", i)
	g.apps = append(g.apps, name)
	b := builder.Pod(Namespace, "").Label("app", name).OwnedBy("apps/v1", "ReplicaSet", name).
		CPU(pick(g, "100m", "500m", "1", "2", "3", "6")).Memory(pick(g, "256Mi", "1Gi", "4Gi", "12Gi"))
	var traits []string
	trait := func(s string, args ...any) { traits = append(traits, fmt.Sprintf(s, args...)) }
	if g.chance(0.4) {
		tmpl := pick(g, "one-gpu", "one-gpu", "two-gpu", "h100", "gpu-nic", "mig-1g", "mig-2x1g", "whole-or-1g", "mem20")
		b = b.ClaimFromTemplate("gpu", tmpl)
		trait("claim from %s", tmpl)
	}
	if g.chance(0.6) {
		b = b.Toleration(gpuTaint, "", corev1.TaintEffectNoSchedule)
		trait("tolerates %s", gpuTaint)
	}
	if g.chance(0.25) {
		v := pick(g, "a", "b", "c")
		b = b.NodeSelector(poolKey, v)
		trait("pool=%s", v)
	}
	if g.chance(0.15) {
		v := pick(g, "z1", "z2")
		b = b.NodeSelector(zoneKey, v)
		trait("zone=%s", v)
	}
	replicas := 1 + g.r.IntN(4)
	// A gang: all its pods or none (a PodGroup of the gang policy).
	if replicas > 1 && g.chance(0.15) {
		pg := builder.PodGroup(Namespace, name).MinCount(int32(replicas))
		if g.chance(0.3) {
			pg = pg.TopologyKey(zoneKey)
			trait("gang of %d in one zone", replicas)
		} else {
			trait("gang of %d", replicas)
		}
		g.add(pg.Obj())
		b = b.PodGroup(name)
	}
	pod := b.Obj()
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	aff := &corev1.Affinity{}
	if g.chance(0.15) {
		aff.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: poolKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"c"}}}}}}}
		trait("affinity pool notin c")
	}
	if g.chance(0.2) {
		if aff.NodeAffinity == nil {
			aff.NodeAffinity = &corev1.NodeAffinity{}
		}
		v := pick(g, "a", "b")
		aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 10,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: poolKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v}}}}}}
		trait("prefers pool %s", v)
	}
	if g.chance(0.15) {
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: sel, TopologyKey: corev1.LabelHostname}}}
		trait("anti-affinity by hostname")
	} else if g.chance(0.1) {
		aff.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: zoneKey}}}}
		trait("prefers zones apart")
	}
	if len(g.apps) > 1 && g.chance(0.1) {
		other := g.apps[g.r.IntN(len(g.apps)-1)]
		aff.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": other}}, TopologyKey: zoneKey}}}
		trait("affinity to %s by zone", other)
	}
	if aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity != nil {
		pod.Spec.Affinity = aff
	}
	if g.chance(0.2) {
		key := pick(g, zoneKey, zoneKey, corev1.LabelHostname)
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel})
		trait("spread by %s", key)
	}
	if g.chance(0.15) {
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel})
		trait("spread by host, soft")
	}
	if g.chance(0.3) {
		g.add(builder.Service(Namespace, name, map[string]string{"app": name}))
		trait("service")
	}
	// One claim the app's pods share, instead of a claim each: they
	// must meet on its node.
	shared := len(pod.Spec.ResourceClaims) == 0 && g.chance(0.08)
	if shared {
		claim := name + "-shared"
		g.add(builder.Claim(Namespace, claim).Request(builder.Request("gpu", "gpu")).Obj())
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		trait("shares claim %s", claim)
	}
	volume := g.chance(0.1)
	if volume {
		pv, pvc := name+"-pv", name+"-data"
		vb := builder.PV(pv).BoundTo(Namespace, pvc)
		if g.chance(0.5) {
			zone := pick(g, "z1", "z2")
			vb = vb.InZone(zone)
			trait("volume in %s", zone)
		}
		g.add(vb.Obj(), builder.PVC(Namespace, pvc, pv))
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}})
		trait("volume %s", pvc)
	}
	for r := range replicas {
		p := pod.DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", name, r)
		p.UID = types.UID("pod-" + p.Name)
		p.CreationTimestamp = metav1.NewTime(Now.Add(-time.Minute))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
		g.add(p)
	}
	g.note("app %s: %d pending, %s %s, %s", name, replicas, pod.Spec.Containers[0].Resources.Requests.Cpu(),
		pod.Spec.Containers[0].Resources.Requests.Memory(), strings.Join(traits, ", "))
}

// running adds pods bound to the existing nodes: some of the apps'
// (spreading and affinity count them), some holding a GPU.
func (g *gen) running() {
	for _, n := range g.nodes {
		kind := n.Labels["group"][strings.IndexByte(n.Labels["group"], '-')+1:]
		var held []string
		for k := range g.r.IntN(3) {
			name := fmt.Sprintf("%s-run-%d", n.Name, k)
			// Evictable, so that scale-down simulates moving them (no
			// draw of the generator: the clusters stay the seeds' own).
			b := builder.Pod(Namespace, name).Label("app", pick(g, g.apps...)).CPU(pick(g, "500m", "1", "2")).Memory("1Gi").
				Toleration(gpuTaint, "", corev1.TaintEffectNoSchedule).Annotation("cluster-autoscaler.kubernetes.io/safe-to-evict", "true")
			var claim *resourceapi.ResourceClaim
			if dev := g.allocatable(kind, held); dev != "" && g.chance(0.6) {
				held = append(held, dev)
				req := builder.Request("gpu", "gpu")
				if kind == kindMIG {
					req = req.Selector(fmt.Sprintf("device.attributes[%q].profile == \"1g\"", gpuDriver))
				}
				cb := builder.Claim(Namespace, name+"-gpu").Request(req).Allocated(n.Name, builder.AllocatedDevice("gpu", gpuDriver, n.Name, dev))
				b = b.Claim("gpu", name+"-gpu")
				claim = cb.ReservedFor(b.Obj()).Obj()
			}
			p := b.Node(n.Name).Obj()
			g.add(p)
			if claim != nil {
				g.add(claim)
			}
			g.note("  pod %s on %s: app %s, device %v", name, n.Name, p.Labels["app"], claim != nil)
		}
	}
}

// allocatable is a device of a node of kind that no claim holds yet
// ("" when none is left or the kind has none a running pod takes).
func (g *gen) allocatable(kind string, held []string) string {
	var devs []string
	switch kind {
	case kindGPU:
		devs = []string{"gpu-0", "gpu-1"}
	case kindMIG:
		devs = []string{"gpu-0-1g-0", "gpu-0-1g-1", "gpu-0-1g-2"}
	}
	for _, d := range devs {
		if !slices.Contains(held, d) {
			return d
		}
	}
	return ""
}

// profile makes, one cluster in three, the default scheduler's profile
// one with an addedAffinity, hard default spreading, or both.
func (g *gen) profile() {
	if !g.chance(1.0 / 3) {
		return
	}
	p := builder.SchedulerProfile(corev1.DefaultSchedulerName)
	var what []string
	if g.chance(0.6) {
		vs := pick(g, []string{"a", "b"}, []string{"b", "c"}, []string{"a", "c"})
		p = p.RequireNodeLabel(poolKey, vs...)
		what = append(what, fmt.Sprintf("addedAffinity pool in %v", vs))
	}
	if len(what) == 0 || g.chance(0.5) {
		key := pick(g, zoneKey, corev1.LabelHostname)
		p = p.HardDefaultSpread(key, 1)
		what = append(what, "hard default spread by "+key)
	}
	cfg, err := builder.SchedulerConfigYAML(p)
	if err != nil {
		panic(err) // the builder's own types always marshal
	}
	g.c.SchedulerConfig = cfg
	g.note("profile: %s", strings.Join(what, ", "))
}
