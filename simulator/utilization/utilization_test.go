package utilization

import (
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const gpu, nic = "gpu.example.com", "nic.example.com"

func nodeInfo(node *corev1.Node, pods ...*corev1.Pod) *schedframework.NodeInfo {
	ni := schedframework.NewNodeInfo(pods...)
	ni.SetNode(node)
	return ni
}

func gpus(node string, n int) *resourceapi.ResourceSlice {
	b := builder.ResourceSlice(node+"-gpu", node, gpu, node)
	for i := range n {
		b.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)))
	}
	return b.Obj()
}

func state(dedicated []structured.DeviceID, shared []structured.SharedDeviceID, capacity structured.ConsumedCapacityCollection) *structured.AllocatedState {
	return &structured.AllocatedState{AllocatedDevices: sets.New(dedicated...), AllocatedSharedDeviceIDs: sets.New(shared...), AggregatedCapacity: capacity}
}

func TestNode(t *testing.T) {
	n1 := builder.Node("n1").CPU("8").Memory("32Gi").Obj()
	mig := []*resourceapi.ResourceSlice{
		builder.ResourceSlice("n1-counters", "n1", gpu, "n1").Pool(1, 2).
			SharedCounters(builder.CounterSet("gpu-0").Counter("slices", "7")).Obj(),
	}
	parts := builder.ResourceSlice("n1-parts", "n1", gpu, "n1").Pool(1, 2).
		Devices(builder.Device("whole").ConsumesCounters("gpu-0", map[string]string{"slices": "7"}))
	for i := range 7 {
		parts.Devices(builder.Device(fmt.Sprintf("mig-%d", i)).ConsumesCounters("gpu-0", map[string]string{"slices": "1"}))
	}
	mig = append(mig, parts.Obj())
	shared := builder.ResourceSlice("n1-gpu", "n1", gpu, "n1").
		Devices(builder.Device("gpu-0").AllowMultipleAllocations().Capacity("memory", "40Gi")).Obj()
	gpu0 := structured.MakeDeviceID(gpu, "n1", "gpu-0")
	share := structured.MakeSharedDeviceID(gpu0, ptrTo(types.UID("s1")))
	tenGi := resource.MustParse("10Gi")

	tests := []struct {
		name       string
		pods       []*corev1.Pod
		slices     []*resourceapi.ResourceSlice
		state      *structured.AllocatedState
		want       float64
		resource   string
		hasDevices bool
	}{
		{name: "empty node", want: 0, resource: "cpu"},
		{name: "cpu bound", pods: []*corev1.Pod{builder.Pod("ns", "p").CPU("6").Memory("8Gi").Obj()}, want: 0.75, resource: "cpu"},
		{name: "memory bound", pods: []*corev1.Pod{builder.Pod("ns", "p").CPU("1").Memory("24Gi").Obj()}, want: 0.75, resource: "memory"},
		{
			name: "one of eight whole GPUs", slices: []*resourceapi.ResourceSlice{gpus("n1", 8)},
			state: state([]structured.DeviceID{gpu0}, nil, nil), want: 1.0 / 8, resource: gpu, hasDevices: true,
		},
		{
			name: "one of seven partitions: counters, not whole devices", slices: mig,
			state: state([]structured.DeviceID{structured.MakeDeviceID(gpu, "n1", "mig-3")}, nil, nil), want: 1.0 / 7, resource: gpu, hasDevices: true,
		},
		{
			name: "the whole partitionable GPU", slices: mig,
			state: state([]structured.DeviceID{structured.MakeDeviceID(gpu, "n1", "whole")}, nil, nil), want: 1, resource: gpu, hasDevices: true,
		},
		{
			name: "consumable capacity: 10Gi of 40Gi", slices: []*resourceapi.ResourceSlice{shared},
			state: state(nil, []structured.SharedDeviceID{share}, structured.ConsumedCapacityCollection{gpu0: {"memory": &tenGi}}),
			want:  0.25, resource: gpu, hasDevices: true,
		},
		{
			name: "the busiest driver counts", pods: []*corev1.Pod{builder.Pod("ns", "p").CPU("2").Obj()},
			slices: []*resourceapi.ResourceSlice{gpus("n1", 2), builder.ResourceSlice("n1-nic", "n1", nic, "n1").Devices(builder.Device("nic-0"), builder.Device("nic-1")).Obj()},
			state:  state([]structured.DeviceID{gpu0, structured.MakeDeviceID(nic, "n1", "nic-0")}, nil, nil), want: 0.5, resource: gpu, hasDevices: true,
		},
		{
			name: "devices idle, cpu busier", pods: []*corev1.Pod{builder.Pod("ns", "p").CPU("2").Obj()},
			slices: []*resourceapi.ResourceSlice{gpus("n1", 8)}, state: state(nil, nil, nil), want: 0.25, resource: "cpu", hasDevices: true,
		},
		{
			name:   "another node's devices do not count",
			slices: []*resourceapi.ResourceSlice{gpus("n2", 2)}, state: state([]structured.DeviceID{structured.MakeDeviceID(gpu, "n2", "gpu-0")}, nil, nil),
			want: 0, resource: "cpu",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state
			if st == nil {
				st = state(nil, nil, nil)
			}
			got := New(tc.slices, st).Node(nodeInfo(n1, tc.pods...))
			if math.Abs(got.Utilization-tc.want) > 1e-9 || got.Resource != tc.resource || got.HasDevices != tc.hasDevices {
				t.Fatalf("got %s (resource %s, devices %v), want %.3f (%s, %v)", got, got.Resource, got.HasDevices, tc.want, tc.resource, tc.hasDevices)
			}
		})
	}
}

func TestOldPoolGenerationsIgnored(t *testing.T) {
	old := builder.ResourceSlice("n1-gpu-old", "n1", gpu, "n1").Pool(1, 1).Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	cur := builder.ResourceSlice("n1-gpu", "n1", gpu, "n1").Pool(2, 1).Devices(builder.Device("gpu-0")).Obj()
	st := state([]structured.DeviceID{structured.MakeDeviceID(gpu, "n1", "gpu-0")}, nil, nil)
	got := New([]*resourceapi.ResourceSlice{old, cur}, st).Node(nodeInfo(builder.Node("n1").Obj()))
	if got.DRA != 1 {
		t.Fatalf("DRA %v, want 1: the newest generation has one device, allocated", got.DRA)
	}
}

func ptrTo[T any](v T) *T { return &v }
