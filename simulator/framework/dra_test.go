package framework

import (
	"fmt"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// step schedules one pod and states where it must land ("" for nowhere,
// then rejected on every candidate by wantPlugin).
type step struct {
	pod        *v1.Pod
	wantNode   string
	wantPlugin string
	// before changes the snapshot ahead of this step.
	before func(t *testing.T, s snapshot.ClusterSnapshot)
}

type scenario struct {
	name    string
	objects []any
	nodes   []string // candidates, in preference order
	steps   []step
	// check inspects the snapshot after all steps.
	check func(t *testing.T, s snapshot.ClusterSnapshot)
}

// runScenarios runs each scenario through SchedulePod and again through
// SchedulePodInfo, which must behave the same.
func runScenarios(t *testing.T, scenarios []scenario) {
	t.Helper()
	for _, sc := range scenarios {
		for _, withInfo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/podInfo=%v", sc.name, withInfo), func(t *testing.T) {
				runScenario(t, sc, withInfo)
			})
		}
	}
}

func runScenario(t *testing.T, sc scenario, withInfo bool) {
	r, ctx := newRunner(t, "")
	snapshottest.Load(t, r.Snapshot(), sc.objects...)
	for i, st := range sc.steps {
		if st.before != nil {
			st.before(t, r.Snapshot())
		}
		var p *ScheduleResult
		var err error
		if withInfo {
			info, _ := schedframework.NewPodInfo(st.pod)
			p, err = r.SchedulePodInfo(ctx, info, sc.nodes)
		} else {
			p, err = r.SchedulePod(ctx, st.pod, sc.nodes)
		}
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.pod.Name, err)
		}
		if p.Node != st.wantNode {
			t.Fatalf("step %d (%s): placed on %q, want %q; results %+v", i, st.pod.Name, p.Node, st.wantNode, p.Results)
		}
		if st.wantNode == "" {
			for _, nr := range p.Results {
				if nr.Plugin != st.wantPlugin {
					t.Fatalf("step %d (%s): node %s rejected by %q (%s), want %q", i, st.pod.Name, nr.Node, nr.Plugin, nr.Message, st.wantPlugin)
				}
			}
		}
	}
	if sc.check != nil {
		sc.check(t, r.Snapshot())
	}
}

// claimPods returns n pods using one claim each from the template.
func claimPods(prefix, template string, n int) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = builder.Pod(ns, fmt.Sprintf("%s-%d", prefix, i)).CPU("100m").ClaimFromTemplate("dev", template).Obj()
	}
	return pods
}

// fitSteps expects pods to land on node, all but the last nOverflow which
// fit nowhere because of DynamicResources.
func fitSteps(pods []*v1.Pod, node string, nOverflow int) []step {
	steps := make([]step, len(pods))
	for i, p := range pods {
		steps[i] = step{pod: p, wantNode: node}
		if i >= len(pods)-nOverflow {
			steps[i] = step{pod: p, wantPlugin: names.DynamicResources}
		}
	}
	return steps
}

// gpuNICNode is a node with 8 GPUs and 8 NICs on 4 PCIe roots. NICs are
// numbered against the GPUs (nic-0 shares a root with gpu-6 and gpu-7), so
// only an allocator that honours matchAttribute pairs them right.
func gpuNICNode(name string) []any {
	gpus := builder.ResourceSlice(name+"-gpus", name, gpuDriver, name)
	nics := builder.ResourceSlice(name+"-nics", name, nicDriver, name)
	for i := range 8 {
		gpus.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i/2)))
		nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", (7-i)/2)))
	}
	return []any{builder.Node(name).Obj(), gpus.Obj(), nics.Obj()}
}

func classes() []any {
	return []any{
		builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.DeviceClass("nic").Driver(nicDriver).Obj(),
	}
}

// allocatedRoots returns, for each claim, the pcieRoot of every device.
func allocatedRoots(t *testing.T, s snapshot.ClusterSnapshot) map[string][]string {
	t.Helper()
	slices, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	root := map[string]string{}
	for _, sl := range slices {
		for _, d := range sl.Spec.Devices {
			if a, ok := d.Attributes[pcieRoot]; ok {
				root[sl.Spec.Driver+"/"+d.Name] = *a.StringValue
			}
		}
	}
	claims, _ := s.ResourceClaims().List()
	out := map[string][]string{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			t.Fatalf("claim %s left unallocated", c.Name)
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			out[c.Name] = append(out[c.Name], root[r.Driver+"/"+r.Device])
		}
	}
	return out
}

func TestTopologyMatchAttribute(t *testing.T) {
	objects := append(classes(), gpuNICNode("n1")...)
	objects = append(objects, builder.ClaimTemplate(ns, "gpu-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj())
	runScenarios(t, []scenario{{
		name:    "8 GPU+NIC pairs on one root fit, the 9th does not",
		objects: objects,
		nodes:   []string{"n1"},
		steps:   fitSteps(claimPods("pair", "gpu-nic", 9), "n1", 1),
		check: func(t *testing.T, s snapshot.ClusterSnapshot) {
			roots := allocatedRoots(t, s)
			if len(roots) != 8 {
				t.Fatalf("%d allocated claims, want 8 (the 9th pod's claim must be reverted)", len(roots))
			}
			for claim, r := range roots {
				if len(r) != 2 || r[0] == "" || r[0] != r[1] {
					t.Errorf("claim %s: devices on roots %v, want one shared root", claim, r)
				}
			}
		},
	}})
}

func TestSharingDevices(t *testing.T) {
	// One physical GPU with 7 slice counters, offered whole or as 7 MIG-like
	// partitions.
	// The API wants counters and devices in separate slices of one pool.
	counters := builder.ResourceSlice("n1-gpu-counters", "n1", gpuDriver, "n1").Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0-counters").Counter("slices", "7"))
	partitioned := builder.ResourceSlice("n1-gpu", "n1", gpuDriver, "n1").Pool(1, 2).
		Devices(builder.Device("gpu-0").Attr("type", "whole").
			ConsumesCounters("gpu-0-counters", map[string]string{"slices": "7"}))
	for i := range 7 {
		partitioned.Devices(builder.Device(fmt.Sprintf("gpu-0-mig-%d", i)).Attr("type", "mig").
			ConsumesCounters("gpu-0-counters", map[string]string{"slices": "1"}))
	}
	byType := func(typ string) *builder.RequestBuilder {
		return builder.Request("gpu", "gpu").Selector(fmt.Sprintf(`device.attributes[%q].type == %q`, gpuDriver, typ))
	}
	partitionSteps := append(fitSteps(claimPods("mig", "mig", 7), "n1", 0),
		step{pod: builder.Pod(ns, "whole").ClaimFromTemplate("dev", "whole").Obj(), wantPlugin: names.DynamicResources})

	shared := builder.ResourceSlice("n1-gpu", "n1", gpuDriver, "n1").Devices(
		builder.Device("gpu-0").AllowMultipleAllocations().CapacityPolicy("memory", "40Gi", "10Gi", ""))

	runScenarios(t, []scenario{
		{
			name: "partitionable: seven 1-slice claims fit, then a whole GPU does not",
			objects: append(classes(), builder.Node("n1").Obj(), counters.Obj(), partitioned.Obj(),
				builder.ClaimTemplate(ns, "mig").Request(byType("mig")).Obj(),
				builder.ClaimTemplate(ns, "whole").Request(byType("whole")).Obj()),
			nodes: []string{"n1"},
			steps: append([]step{{
				// Before any slice is taken, the whole GPU is available.
				pod: builder.Pod(ns, "whole-first").ClaimFromTemplate("dev", "whole").Obj(), wantNode: "n1",
				before: nil,
			}, {
				pod: builder.Pod(ns, "mig-blocked").ClaimFromTemplate("dev", "mig").Obj(), wantPlugin: names.DynamicResources,
			}, {
				pod: builder.Pod(ns, "free-whole").Obj(), wantNode: "n1",
				before: func(t *testing.T, s snapshot.ClusterSnapshot) {
					// Freeing the whole-GPU claim frees all seven slices.
					mustRemoveOwnedClaims(t, s, builder.Pod(ns, "whole-first").Obj())
				},
			}}, partitionSteps...),
		},
		{
			name: "consumable capacity: 10Gi claims share a 40Gi device until it is full",
			objects: append(classes(), builder.Node("n1").Obj(), shared.Obj(),
				builder.ClaimTemplate(ns, "10g").Request(builder.Request("gpu", "gpu").Capacity("memory", "10Gi")).Obj()),
			nodes: []string{"n1"},
			steps: fitSteps(claimPods("share", "10g", 5), "n1", 1),
			check: func(t *testing.T, s snapshot.ClusterSnapshot) {
				state, _ := s.ResourceClaims().GatherAllocatedState()
				if len(state.AllocatedSharedDeviceIDs) != 4 || len(state.AllocatedDevices) != 0 {
					t.Fatalf("allocated state %v, want 4 shares of one device and no exclusive device", state)
				}
			},
		},
	})
}

func mustRemoveOwnedClaims(t *testing.T, s snapshot.ClusterSnapshot, pod *v1.Pod) {
	t.Helper()
	for _, c := range s.ClaimsOwnedBy(pod.UID) {
		if err := s.RemoveResourceClaim(c.Namespace, c.Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemovePod(pod.Namespace, pod.Name); err != nil {
		t.Fatal(err)
	}
}

func TestPrioritizedList(t *testing.T) {
	slice := builder.ResourceSlice("n1-gpu", "n1", gpuDriver, "n1").
		Devices(builder.Device("gpu-0").Attr("model", "a100"))
	model := func(name, m string) *builder.RequestBuilder {
		return builder.Request(name, "gpu").Selector(fmt.Sprintf(`device.attributes[%q].model == %q`, gpuDriver, m))
	}
	runScenarios(t, []scenario{{
		name: "falls back to the second alternative",
		objects: append(classes(), builder.Node("n1").Obj(), slice.Obj(),
			builder.ClaimTemplate(ns, "h100-or-a100").Request(
				builder.FirstAvailable("gpu", model("h100", "h100"), model("a100", "a100"))).Obj()),
		nodes: []string{"n1"},
		steps: fitSteps(claimPods("p", "h100-or-a100", 2), "n1", 1),
		check: func(t *testing.T, s snapshot.ClusterSnapshot) {
			claims, _ := s.ResourceClaims().List()
			if len(claims) != 1 {
				t.Fatalf("%d claims, want 1", len(claims))
			}
			if got := claims[0].Status.Allocation.Devices.Results[0].Request; got != "gpu/a100" {
				t.Fatalf("allocated for request %q, want the fallback gpu/a100", got)
			}
		},
	}})
}

func TestDeviceTaints(t *testing.T) {
	tainted := builder.ResourceSlice("n1-gpu", "n1", gpuDriver, "n1").
		Devices(builder.Device("gpu-0").Taint("example.com/ecc", "", resourceapi.DeviceTaintEffectNoSchedule))
	clean := builder.ResourceSlice("n1-gpu", "n1", gpuDriver, "n1").Devices(builder.Device("gpu-0"))
	plain := builder.ClaimTemplate(ns, "plain").Request(builder.Request("gpu", "gpu")).Obj()
	tolerant := builder.ClaimTemplate(ns, "tolerant").
		Request(builder.Request("gpu", "gpu").Tolerate("example.com/ecc", "", "")).Obj()
	rule := builder.DeviceTaintRule("ecc", "example.com/ecc", "", resourceapi.DeviceTaintEffectNoSchedule).
		Driver(gpuDriver).Device("gpu-0").Obj()
	runScenarios(t, []scenario{
		{
			name:    "taint in the slice blocks unless tolerated",
			objects: append(classes(), builder.Node("n1").Obj(), tainted.Obj(), plain, tolerant),
			nodes:   []string{"n1"},
			steps: []step{
				{pod: claimPods("plain", "plain", 1)[0], wantPlugin: names.DynamicResources},
				{pod: claimPods("tolerant", "tolerant", 1)[0], wantNode: "n1"},
			},
		},
		{
			name:    "DeviceTaintRule blocks unless tolerated, and stops when removed",
			objects: append(classes(), builder.Node("n1").Obj(), clean.Obj(), plain, tolerant, rule),
			nodes:   []string{"n1"},
			steps: []step{
				{pod: claimPods("plain", "plain", 1)[0], wantPlugin: names.DynamicResources},
				{pod: claimPods("plain-after", "plain", 1)[0], wantNode: "n1",
					before: func(t *testing.T, s snapshot.ClusterSnapshot) {
						if err := s.RemoveDeviceTaintRule("ecc"); err != nil {
							t.Fatal(err)
						}
					}},
			},
		},
		{
			name:    "DeviceTaintRule tolerated",
			objects: append(classes(), builder.Node("n1").Obj(), clean.Obj(), tolerant, rule),
			nodes:   []string{"n1"},
			steps:   []step{{pod: claimPods("tolerant", "tolerant", 1)[0], wantNode: "n1"}},
		},
	})
}
