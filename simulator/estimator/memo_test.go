package estimator

import (
	"fmt"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// memoScenario is an estimate to run with the memo on and off.
type memoScenario struct {
	name    string
	cluster func(t *testing.T) (objs []any, pods []*v1.Pod, tmpl *cloudprovider.NodeTemplate)
	// minHits guards against a scenario that silently stops exercising
	// the memo.
	minHits int
}

// TestMemoIsExact is the proof that memoized verdicts and copied
// placements change nothing: for each scenario, estimates with the memo
// on and off must agree on every node and every pod, and the snapshots
// EstimateAndKeep leaves must read the same (claim names and UIDs,
// allocations, reservations, pods on nodes, allocated devices).
func TestMemoIsExact(t *testing.T) {
	for _, sc := range memoScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			var outcomes [2]outcome
			var dumps [2]string
			hits := 0
			for i, memo := range []bool{true, false} {
				for _, keep := range []bool{false, true} {
					r, ctx := newRunner(t)
					objs, pods, tmpl := sc.cluster(t)
					snapshottest.Load(t, r.Snapshot(), objs...)
					e := New(r, Options{DisableMemo: !memo})
					run := e.Estimate
					if keep {
						run = e.EstimateAndKeep
					}
					res, err := run(ctx, pods, tmpl, "g")
					if err != nil {
						t.Fatalf("memo=%v keep=%v: %v", memo, keep, err)
					}
					if keep {
						dumps[i] = dump(t, r.Snapshot())
						if got := outcomeOf(res); !reflect.DeepEqual(got, outcomes[i]) {
							t.Fatalf("memo=%v: EstimateAndKeep %+v differs from Estimate %+v", memo, got, outcomes[i])
						}
					} else {
						outcomes[i] = outcomeOf(res)
					}
					if memo {
						hits = max(hits, res.MemoHits)
					} else if res.MemoHits != 0 {
						t.Fatalf("memo off but %d hits", res.MemoHits)
					}
				}
			}
			if !reflect.DeepEqual(outcomes[0], outcomes[1]) {
				t.Fatalf("estimates differ:\nmemo on:  %+v\nmemo off: %+v", outcomes[0], outcomes[1])
			}
			if dumps[0] != dumps[1] {
				t.Fatalf("kept snapshots differ:\n%s", firstDiff(dumps[1], dumps[0]))
			}
			if hits < sc.minHits {
				t.Fatalf("only %d memo hits, want at least %d: the scenario no longer exercises the memo", hits, sc.minHits)
			}
			t.Logf("%d nodes, %d placed, %d unplaced, %d memo hits", len(outcomes[0].Nodes), len(outcomes[0].Placed), len(outcomes[0].Unplaced), hits)
		})
	}
}

func memoScenarios() []memoScenario {
	return []memoScenario{{
		name: "own claims, scale from zero",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			pods, objs := ownClaimPods("job", 45, 1)
			more, objs2 := ownClaimPods("pair", 13, 2)
			return append(append(classes(), objs...), objs2...), append(pods, more...), gpuTemplate(8, nil)
		},
		minHits: 30,
	}, {
		name: "shapes from claim templates, daemon pods on the template",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			pods, objs := shapedPods(150, 8)
			tmpl := gpuTemplate(8, nil)
			ds := builder.DaemonSet("kube-system", "agent").Obj()
			agent := builder.PodFromDaemonSet(ds, "agent", template.PlaceholderNodeName)
			agent.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
			tmpl.Pods = []*v1.Pod{agent}
			return append(classes(), objs...), pods, tmpl
		},
		minHits: 50,
	}, {
		name: "busy existing nodes, one named like a new node",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			pods, objs := shapedPods(60, 4)
			objs = append(append(classes(), busyNodes(30, 20)...), objs...)
			objs = append(objs, builder.Node("g-template-1").Obj())
			return objs, pods, gpuNICTemplate()
		},
		minHits: 20,
	}, {
		name: "GPU+NIC pairs with single GPUs and CPU-only pods",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			objs := append(classes(),
				builder.ClaimTemplate(ns, "gpu-nic").Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj(),
				builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
			pods := append(templatePods("pair", "gpu-nic", "2", 21), templatePods("single", "one-gpu", "5", 13)...)
			for i := range 30 {
				pods = append(pods, builder.Pod(ns, fmt.Sprintf("cpu-%d", i)).CPU("7").OwnedBy("apps/v1", "ReplicaSet", "cpu").Obj())
			}
			return objs, pods, gpuNICTemplate()
		},
		minHits: 30,
	}, {
		name: "partitionable GPUs: slices, then whole GPUs",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			objs := append(classes(),
				builder.ClaimTemplate(ns, "mig-1g").Request(builder.Request("gpu", "gpu").Selector(`device.attributes["gpu.example.com"].profile == "1g"`)).Obj(),
				builder.ClaimTemplate(ns, "mig-7g").Request(builder.Request("gpu", "gpu").Selector(`device.attributes["gpu.example.com"].profile == "7g"`)).Obj())
			pods := append(templatePods("whole", "mig-7g", "1", 5), templatePods("slice", "mig-1g", "1", 40)...)
			return objs, pods, migTemplate()
		},
		minHits: 20,
	}, {
		name: "consumable capacity: claims share GPUs by memory",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			objs := append(classes(),
				builder.ClaimTemplate(ns, "gpu-20g").Request(builder.Request("gpu", "gpu").Capacity("memory", "20Gi")).Obj())
			return objs, templatePods("share", "gpu-20g", "1", 50), sharedGPUTemplate()
		},
		minHits: 20,
	}, {
		name: "anti-affinity and spread pods among memoized ones",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			objs := append(classes(), builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
			pods := templatePods("gpu", "one-gpu", "1", 30)
			for i := range 4 {
				p := builder.Pod(ns, fmt.Sprintf("lonely-%d", i)).CPU("1").Label("app", "lonely").OwnedBy("apps/v1", "ReplicaSet", "lonely").ClaimFromTemplate("dev", "one-gpu").Obj()
				p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "lonely"}}, TopologyKey: v1.LabelHostname,
				}}}}
				pods = append(pods, p)
				s := builder.Pod(ns, fmt.Sprintf("spread-%d", i)).CPU("20").Label("app", "spread").OwnedBy("apps/v1", "ReplicaSet", "spread").Obj()
				s.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.DoNotSchedule,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
				}}
				pods = append(pods, s)
			}
			return objs, pods, gpuTemplate(8, nil)
		},
		minHits: 10,
	}, {
		name: "network-attached devices are never copied",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			fabric := builder.ResourceSlice("fabric", "", "fabric.example.com", "fabric")
			for i := range 5 {
				fabric.Devices(builder.Device(fmt.Sprintf("link-%d", i)))
			}
			objs := append(classes(), fabric.Obj(),
				builder.DeviceClass("link").Driver("fabric.example.com").Obj(),
				builder.ClaimTemplate(ns, "gpu-link").Request(builder.Request("gpu", "gpu"), builder.Request("link", "link")).Obj(),
				builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
			pods := append(templatePods("linked", "gpu-link", "1", 9), templatePods("plain", "one-gpu", "1", 20)...)
			return objs, pods, gpuTemplate(8, nil)
		},
		minHits: 5,
	}, {
		name: "extended resources backed by DRA are never copied",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			objs := []any{builder.DeviceClass("gpu").Driver(gpuDriver).ExtendedResource("example.com/gpu").Obj(),
				builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()}
			var pods []*v1.Pod
			for i := range 12 {
				pods = append(pods, builder.Pod(ns, fmt.Sprintf("ext-%d", i)).CPU("1").Request("example.com/gpu", "1").OwnedBy("apps/v1", "ReplicaSet", "ext").Obj())
			}
			return objs, append(pods, templatePods("claim", "one-gpu", "1", 12)...), gpuTemplate(8, nil)
		},
	}, {
		// The shared pool's name sorts after the pools of g-template-0 and
		// -1 and before g-template-2's: the allocator prefers it on the
		// third node only (the first two are full by CPU before they
		// would use it), so no placement of this driver may be copied.
		name: "a node-local driver that also has a shared pool",
		cluster: func(t *testing.T) ([]any, []*v1.Pod, *cloudprovider.NodeTemplate) {
			shared := builder.ResourceSlice("spare-gpus", "", gpuDriver, "g-template-1z")
			for i := range 3 {
				shared.Devices(builder.Device(fmt.Sprintf("spare-%d", i)))
			}
			objs := append(classes(), shared.Obj(), builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
			return objs, templatePods("gpu", "one-gpu", "8", 40), gpuTemplate(8, nil)
		},
	}}
}

// migTemplate has 2 partitionable GPUs of 7 slices each, published as a
// whole-GPU device ("7g") and seven one-slice devices ("1g") per GPU, all
// drawing on the GPU's counter set.
func migTemplate() *cloudprovider.NodeTemplate {
	node := builder.Node(template.PlaceholderNodeName).CPU("64").Memory("512Gi").Obj()
	counters := builder.ResourceSlice("counters", node.Name, gpuDriver, node.Name).Pool(1, 2)
	devices := builder.ResourceSlice("devices", node.Name, gpuDriver, node.Name).Pool(1, 2)
	for g := range 2 {
		set := fmt.Sprintf("gpu-%d", g)
		counters.SharedCounters(builder.CounterSet(set).Counter("slices", "7"))
		devices.Devices(builder.Device(set+"-7g").Attr("profile", "7g").ConsumesCounters(set, map[string]string{"slices": "7"}))
		for s := range 7 {
			devices.Devices(builder.Device(fmt.Sprintf("%s-1g-%d", set, s)).Attr("profile", "1g").ConsumesCounters(set, map[string]string{"slices": "1"}))
		}
	}
	return &cloudprovider.NodeTemplate{Node: node, ResourceSlices: []*resourceapi.ResourceSlice{counters.Obj(), devices.Obj()}}
}

// sharedGPUTemplate has 4 GPUs of 80Gi that several claims can share.
func sharedGPUTemplate() *cloudprovider.NodeTemplate {
	node := builder.Node(template.PlaceholderNodeName).CPU("64").Memory("512Gi").Obj()
	s := builder.ResourceSlice("gpus", node.Name, gpuDriver, node.Name)
	for i := range 4 {
		s.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).AllowMultipleAllocations().CapacityPolicy("memory", "80Gi", "10Gi", "10Gi"))
	}
	return &cloudprovider.NodeTemplate{Node: node, ResourceSlices: []*resourceapi.ResourceSlice{s.Obj()}}
}
