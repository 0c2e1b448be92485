package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// exitInputs are flags and config files the binary must refuse at start,
// naming what is wrong.
func exitInputs(t *testing.T, k *catalogue) []badInput {
	dir := k.good[:strings.LastIndex(k.good, "/")]
	file := func(name, body string) string {
		path := dir + "/" + name
		writeFile(t, path, body)
		return path
	}
	group := func(extra string) string {
		return "nodeGroups:\n- name: g\n  maxSize: 1\n  template:\n    capacity: {cpu: \"1\", memory: 1Gi}\n" + extra
	}
	kwokCfg := func(name, body string) []string { return []string{"--cloud-config=" + file(name, body)} }
	good := func(flags ...string) []string { return append([]string{"--cloud-config=" + k.good}, flags...) }
	return []badInput{
		{name: "kwok config: maxSize below minSize", want: "is less than minSize",
			args: kwokCfg("minmax.yaml", "nodeGroups:\n- name: g\n  minSize: 3\n  maxSize: 1\n")},
		{name: "kwok config: negative maxSize", want: "maxSize (-2) must not be negative",
			args: kwokCfg("neg.yaml", "nodeGroups:\n- name: g\n  maxSize: -2\n")},
		{name: "kwok config: not YAML", want: "error converting YAML to JSON",
			args: kwokCfg("garbage.yaml", "nodeGroups: [garbage\n")},
		{name: "kwok config: two groups of one name", want: `node group "g": duplicate name`,
			args: kwokCfg("dup.yaml", group("")+"- name: g\n  maxSize: 1\n")},
		{name: "kwok config: a quantity that overflows", want: "is too large",
			args: kwokCfg("overflow.yaml", "nodeGroups:\n- name: g\n  maxSize: 1\n  template:\n    capacity: {cpu: \"1e1000000\"}\n")},
		{name: "kwok config: negative node quantity", want: "must not be negative",
			args: kwokCfg("negq.yaml", "nodeGroups:\n- name: g\n  maxSize: 1\n  template:\n    capacity: {memory: \"-1Gi\"}\n")},
		{name: "kwok config: one device name twice", want: "duplicate device name",
			args: kwokCfg("dupdev.yaml", group("    drivers:\n    - driver: gpu.example.com\n      devices: [{name: gpu-0}, {name: gpu-0}]\n"))},
		{name: "kwok config: device over-consumes its counter", want: `consumes 20Gi of counter "memory", but set "mem" holds 10Gi`,
			args: kwokCfg("over.yaml", group("    drivers:\n    - driver: gpu.example.com\n"+
				"      sharedCounters: [{name: mem, counters: {memory: {value: 10Gi}}}]\n"+
				"      devices: [{name: gpu-0, consumesCounters: [{counterSet: mem, counters: {memory: {value: 20Gi}}}]}]\n"))},
		{name: "kwok config: device consumes a missing counter set", want: `unknown counter set "nope"`,
			args: kwokCfg("noset.yaml", group("    drivers:\n    - driver: gpu.example.com\n"+
				"      devices: [{name: gpu-0, consumesCounters: [{counterSet: nope, counters: {memory: {value: 1Gi}}}]}]\n"))},
		{name: "kwok config: attribute of two types", want: "attributes[model]",
			args: kwokCfg("attr.yaml", group("    drivers:\n    - driver: gpu.example.com\n      devices: [{name: gpu-0, attributes: {model: {string: a, int: 3}}}]\n"))},
		{name: "kwok config: missing file", want: "/nonexistent.yaml", args: []string{"--cloud-config=/nonexistent.yaml"}},
		{name: "unknown cloud provider", want: `--cloud-provider="aws": unknown`, args: good("--cloud-provider=aws")},
		{name: "unknown flag", want: "--scan-intervall: unknown flag", args: good("--scan-intervall=1s")},
		{name: "malformed duration", want: `"--scan-interval"`, args: good("--scan-interval=soon")},
		{name: "negative scan interval", want: "--scan-interval=-1s: must be positive", args: good("--scan-interval=-1s")},
		{name: "negative --new-pod-scale-up-delay", want: "--new-pod-scale-up-delay: must not be negative", args: good("--new-pod-scale-up-delay=-5s")},
		{name: "negative --max-nodes-total", want: "--max-nodes-total=-1: must not be negative", args: good("--max-nodes-total=-1")},
		{name: "--cores-total min above max", want: "max is below min", args: good("--cores-total=10:5")},
		{name: "--memory-total that overflows", want: "must be non-negative integers", args: good("--memory-total=0:99999999999999999999999")},
		{name: "--scale-down-utilization-threshold above 1", want: "must be between 0 and 1", args: good("--scale-down-utilization-threshold=1.5")},
		{name: "unknown expander", want: `unknown expander "cheapest"`, args: good("--expander=least-waste,cheapest")},
		{name: "--nodes naming a missing group", want: `node group "nope"`, args: good("--nodes=0:3:nope")},
		{name: "--nodes with a malformed max", want: `max "x"`, args: good("--nodes=0:x:g")},
		{name: "--nodes min above max", want: "max 2 is below min 5", args: good("--nodes=5:2:g")},
		{name: "unknown feature gate", want: "NoSuchGate", args: good("--feature-gates=NoSuchGate=true")},
		{name: "scheduler config: missing file", want: "open /nonexistent-sched.yaml", args: good("--scheduler-config-file=/nonexistent-sched.yaml")},
		{name: "scheduler config: wrong types", want: "cannot unmarshal", args: good("--scheduler-config-file=" + file("sched.yaml",
			"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [{schedulerName: x, plugins: nope}]\n"))},
	}
}

// rejectedInputs never reach the autoscaler: the API server refuses them.
// They are here so that the catalogue says where each kind of bad input
// stops.
func rejectedInputs() []badInput {
	return []badInput{
		{name: "claim selector that does not compile", want: "compilation failed", reject: func(k *catalogue) error {
			return k.create(builder.ClaimTemplate(k.ns, "bad-cel").Request(builder.Request("gpu", k.ns+"-gpu").Selector(`device.attributes[`)).Obj())
		}},
		{name: "claim selector over the CEL cost limit", want: "cost", reject: func(k *catalogue) error {
			expensive := `device.attributes.all(a, device.attributes.all(b, device.attributes.all(c, device.attributes.all(d, device.attributes.all(e, ` +
				`device.attributes.all(f, device.attributes.all(g, device.attributes.all(h, a + b + c + d + e + f + g + h != "x"))))))))`
			return k.create(builder.ClaimTemplate(k.ns, "costly").Request(builder.Request("gpu", k.ns+"-gpu").Selector(expensive)).Obj())
		}},
		{name: "pod naming a missing PriorityClass", want: "no PriorityClass with name no-such-priority", reject: func(k *catalogue) error {
			return k.create(k.pod("no-priority").CPU("1").PriorityClass("no-such-priority").Obj())
		}},
		{name: "pod annotation of 1 MiB", want: "may not be more than 262144 bytes", reject: func(k *catalogue) error {
			p := k.pod("huge-annotation").CPU("1").Obj()
			p.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: strings.Repeat("1", 1<<20)}
			return k.create(p)
		}},
		{name: "ResourceSlice of 10,000 devices", want: "must have at most", reject: func(k *catalogue) error {
			b := builder.ResourceSlice(k.ns+"-huge", k.ns+"-static", k.gpu, k.ns+"-huge")
			for i := range 10000 {
				b.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)))
			}
			return k.create(b.Obj())
		}},
		{name: "ResourceSlice naming one device twice", want: "Duplicate value", reject: func(k *catalogue) error {
			return k.create(builder.ResourceSlice(k.ns+"-dup", k.ns+"-static", k.gpu, k.ns+"-dup").
				Devices(builder.Device("gpu-0"), builder.Device("gpu-0")).Obj())
		}},
		{name: "device attribute of two types", want: "must specify exactly one of", reject: func(k *catalogue) error {
			sl := builder.ResourceSlice(k.ns+"-attr", k.ns+"-static", k.gpu, k.ns+"-attr").Devices(builder.Device("gpu-0").Attr("model", "a")).Obj()
			a := sl.Spec.Devices[0].Attributes["model"]
			a.IntValue = ptr.To(int64(3))
			sl.Spec.Devices[0].Attributes["model"] = a
			return k.create(sl)
		}},
		{name: "CapacityReservation that ends before it starts", want: "end", reject: func(k *catalogue) error {
			now := time.Now()
			return k.createReservation("ends-early", map[string]any{"type": "CapacityBlock", "nodeGroups": []any{k.cpu.Name},
				"count": 1, "start": rfc3339(now.Add(time.Hour)), "end": rfc3339(now)})
		}},
		{name: "CapacityReservation of an unknown type", want: `Unsupported value: "Sometimes"`, reject: func(k *catalogue) error {
			return k.createReservation(k.ns+"-odd", map[string]any{"type": "Sometimes", "nodeGroups": []any{k.cpu.Name}, "count": 1})
		}},
		{name: "CapacityReservation with a negative count", want: "count", reject: func(k *catalogue) error {
			return k.createReservation("negative", map[string]any{"type": "Open", "nodeGroups": []any{k.cpu.Name}, "count": -1})
		}},
	}
}

// objectInputs are objects the running autoscaler reads and must name.
func objectInputs() []badInput {
	return []badInput{
		{name: "pod claiming from a missing ResourceClaimTemplate", want: "no-such-template", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, k.pod("no-template").CPU("1").ClaimFromTemplate("gpu", "no-such-template").Obj())
			return k.podEvents("no-template")
		}},
		{name: "pod naming a missing ResourceClaim", want: "no-such-claim", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, k.pod("no-claim").CPU("1").Claim("gpu", "no-such-claim").Obj())
			return k.podEvents("no-claim")
		}},
		{name: "claim of a missing DeviceClass", want: "no-such-class", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, builder.ClaimTemplate(k.ns, "no-class").Request(builder.Request("gpu", "no-such-class")).Obj(),
				k.pod("no-class").CPU("1").ClaimFromTemplate("gpu", "no-class").Obj())
			return k.podEvents("no-class")
		}},
		{name: "claim selector reading a missing attribute (CEL runtime error)", want: "no such key", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, builder.ClaimTemplate(k.ns, "no-key").Request(builder.Request("gpu", k.ns+"-gpu").
				Selector(fmt.Sprintf(`device.attributes[%q].model == "a100"`, k.gpu))).Obj(),
				k.pod("no-key").CPU("1").ClaimFromTemplate("gpu", "no-key").Obj())
			return k.podEvents("no-key")
		}},
		{name: "claim selector comparing a string attribute as a number", want: "no such overload", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, builder.ClaimTemplate(k.ns, "wrong-type").Request(builder.Request("gpu", k.ns+"-gpu").
				Selector(`device.attributes["resource.kubernetes.io"].pcieRoot > 3`)).Obj(),
				k.pod("wrong-type").CPU("1").ClaimFromTemplate("gpu", "wrong-type").Obj())
			return k.podEvents("wrong-type")
		}},
		{name: "DeviceClass whose selector fails at run time", want: "no such key", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, builder.DeviceClass(k.ns+"-broken").Driver(k.gpu).
				Selector(fmt.Sprintf(`device.attributes[%q].model == "a100"`, k.gpu)).Obj(),
				builder.ClaimTemplate(k.ns, "broken-class").Request(builder.Request("gpu", k.ns+"-broken")).Obj(),
				k.pod("broken-class").CPU("1").ClaimFromTemplate("gpu", "broken-class").Obj())
			return k.podEvents("broken-class")
		}},
		{name: "pod of a missing PersistentVolumeClaim", want: `"no-such-pvc" not found`, apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, k.pod("no-pvc").CPU("1").Volume("data", "no-such-pvc").Obj())
			return k.podEvents("no-pvc")
		}},
		{name: "claim of a missing StorageClass", want: "no-such-storage", apply: func(t *testing.T, k *catalogue) seenIn {
			pvc := builder.PVC(k.ns, "no-class", "")
			pvc.Spec.StorageClassName = ptr.To("no-such-storage")
			k.c.Create(k.ctx, t, pvc, k.pod("no-storage").CPU("1").Volume("data", "no-class").Obj())
			return k.podEvents("no-storage")
		}},
		{name: "pod of a missing PodGroup", want: "no-such-group", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, k.pod("no-group").CPU("1").PodGroup("no-such-group").Obj())
			return k.podEvents("no-group")
		}},
		{name: "PodGroup of a missing Workload", want: "no-such-workload", apply: func(t *testing.T, k *catalogue) seenIn {
			k.c.Create(k.ctx, t, builder.PodGroup(k.ns, "orphan").MinCount(1).Workload("no-such-workload", "t").Obj(),
				k.pod("orphan-0").CPU("1").PodGroup("orphan").Obj())
			return k.eventsOn(k.ns, "orphan")
		}},
		{name: "ProvisioningRequest naming a missing PodTemplate", want: "not found", apply: func(t *testing.T, k *catalogue) seenIn {
			return k.requestSaid(k.prov.kueueRequest(t, "broken", v1.ProvisioningClassCheckCapacity, 1, false))
		}},
		{name: "priority expander ConfigMap that is not YAML", want: "InvalidPriorityConfig", apply: func(t *testing.T, k *catalogue) seenIn {
			k.priorities(t, "10: [")
			return k.eventsOn(k.ns, priorityConfigMap)
		}},
		{name: "priority expander pattern that is no regexp", want: "error parsing regexp", apply: func(t *testing.T, k *catalogue) seenIn {
			k.priorities(t, "10:\n- '['\n")
			return k.eventsOn(k.ns, priorityConfigMap)
		}},
		{name: "pod annotation expected-runtime=soon", want: "InvalidAnnotation", apply: func(t *testing.T, k *catalogue) seenIn {
			p := k.pod("runtime-soon").CPU("3").Obj()
			p.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: "soon"}
			k.c.Create(k.ctx, t, p)
			return k.podEvents("runtime-soon")
		}},
		{name: "pod annotation safe-to-evict=maybe", want: "InvalidAnnotation", apply: func(t *testing.T, k *catalogue) seenIn {
			// Alone on a node of the small group, so that scale-down looks at it.
			p := builder.Pod(k.ns, "evict-maybe").CPU("1").NodeSelector(smallRole, "small").Obj()
			p.Annotations = map[string]string{safeToEvict: "maybe"}
			k.c.Create(k.ctx, t, p)
			return k.podEvents("evict-maybe")
		}},
		{name: "node annotation scale-down-disabled=maybe", want: "InvalidAnnotation", apply: func(t *testing.T, k *catalogue) seenIn {
			node := k.boundNode(t, k.valid[0])
			k.annotateNode(t, node, "cluster-autoscaler.kubernetes.io/scale-down-disabled", "maybe")
			return k.clusterEvents(node)
		}},
		{name: "PodDisruptionBudget that selects no pods", want: "SelectsNoPods", apply: func(t *testing.T, k *catalogue) seenIn {
			pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "nobody"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nobody"}}}}
			if _, err := k.c.Client.PolicyV1().PodDisruptionBudgets(k.ns).Create(k.ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return k.eventsOn(k.ns, "nobody")
		}},
		{name: "pool whose resourceSliceCount says 2, 1 published", want: "1 slice(s) published", apply: func(t *testing.T, k *catalogue) seenIn {
			k.staticNode(t)
			k.c.Create(k.ctx, t, builder.ResourceSlice(k.ns+"-short", k.ns+"-static", k.gpu, k.ns+"-short").Pool(1, 2).
				Devices(builder.Device("gpu-0")).Obj())
			return k.clusterEvents(k.ns + "-short")
		}},
		{name: "pool publishing one device name in two slices", want: `device "gpu-0" is published in slices`, apply: func(t *testing.T, k *catalogue) seenIn {
			k.staticNode(t)
			pool := k.ns + "-twice"
			k.c.Create(k.ctx, t,
				builder.ResourceSlice(pool+"-a", k.ns+"-static", k.gpu, pool).Pool(1, 2).Devices(builder.Device("gpu-0")).Obj(),
				builder.ResourceSlice(pool+"-b", k.ns+"-static", k.gpu, pool).Pool(1, 2).Devices(builder.Device("gpu-0")).Obj())
			return k.clusterEvents(pool + "-b")
		}},
		{name: "device consuming more of a counter than its set holds", want: "it can never be allocated", apply: func(t *testing.T, k *catalogue) seenIn {
			k.staticNode(t)
			pool := k.ns + "-over"
			k.c.Create(k.ctx, t,
				builder.ResourceSlice(pool+"-counters", k.ns+"-static", k.gpu, pool).Pool(1, 2).
					SharedCounters(builder.CounterSet("gpu-0").Counter("memory", "40Gi")).Obj(),
				builder.ResourceSlice(pool+"-devices", k.ns+"-static", k.gpu, pool).Pool(1, 2).
					Devices(builder.Device("gpu-0-big").ConsumesCounters("gpu-0", map[string]string{"memory": "80Gi"})).Obj())
			return k.clusterEvents(pool + "-devices")
		}},
		{name: "device consuming a counter set no slice has", want: `counter set "nowhere"`, apply: func(t *testing.T, k *catalogue) seenIn {
			k.staticNode(t)
			pool := k.ns + "-noset"
			k.c.Create(k.ctx, t, builder.ResourceSlice(pool, k.ns+"-static", k.gpu, pool).
				Devices(builder.Device("gpu-0").ConsumesCounters("nowhere", map[string]string{"memory": "1Gi"})).Obj())
			return k.clusterEvents(pool)
		}},
		{name: "ResourceSlice for a node that does not exist", want: "does not exist", apply: func(t *testing.T, k *catalogue) seenIn {
			name := k.ns + "-ghost"
			k.c.Create(k.ctx, t, builder.ResourceSlice(name, k.ns+"-no-such-node", k.gpu, name).Devices(builder.Device("gpu-0")).Obj())
			return k.clusterEvents(name)
		}},
	}
}

const (
	priorityConfigMap = "cluster-autoscaler-priority-expander"
	smallRole         = "catalogue.e2e.dra-autoscaler.io/role"
)
