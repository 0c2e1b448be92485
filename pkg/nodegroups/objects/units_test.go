package objects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A group of units of 2 lists each registered unit with its nodes, its
// idle ones (DaemonSet pods do not count) and its free devices per
// driver, the roomiest first; a group without units lists none.
func TestUnits(t *testing.T) {
	const clique, gpu = "example.com/clique", "gpu.example.com"
	node := func(name, value string) *corev1.Node { return builder.Node(name).Label(clique, value).Obj() }
	slice := func(n string, devices ...string) *resourceapi.ResourceSlice {
		b := builder.ResourceSlice(n+"-gpus", n, gpu, n)
		for _, d := range devices {
			b.Devices(builder.Device(d))
		}
		return b.Obj()
	}
	tmpl := builder.Node("t").Obj()
	tmpl.Annotations = map[string]string{cloudprovider.AnnotationUnitSize: "2", cloudprovider.AnnotationTopologyPerRequest: clique}
	g := &nodegroups.Info{Id: "racks", Template: &cloudprovider.NodeTemplate{Node: tmpl},
		Ready: []*corev1.Node{node("a1", "a"), node("a2", "a"), node("b1", "b")}}
	plain := &nodegroups.Info{Id: "plain", Template: &cloudprovider.NodeTemplate{Node: builder.Node("p").Obj()}, Ready: []*corev1.Node{builder.Node("p1").Obj()}}
	cluster := &observe.ClusterState{
		Pods: []*corev1.Pod{builder.Pod("ns", "work").Node("a1").Obj(), builder.Pod("ns", "agent").OwnedBy("apps/v1", "DaemonSet", "agent").Node("a2").Obj(),
			builder.Pod("ns", "other").Node("p1").Obj()},
		ResourceSlices: []*resourceapi.ResourceSlice{slice("a1", "gpu-0", "gpu-1"), slice("a2", "gpu-0", "gpu-1"), slice("b1", "gpu-0")},
		ResourceClaims: []*resourceapi.ResourceClaim{builder.Claim("ns", "c").Allocated("a1", builder.AllocatedDevice("gpu", gpu, "a1", "gpu-0")).Obj()},
	}
	rooms := NodeRooms(cluster, []*nodegroups.Info{g, plain})
	if _, has := rooms["p1"]; has {
		t.Errorf("rooms %v: a group without units is not read", rooms)
	}
	size, got := units(g, rooms)
	want := []v1alpha1.NodeGroupUnit{
		{Domain: clique + "=a", Nodes: 2, IdleNodes: 1, FreeDevices: []v1alpha1.DriverDevices{{Driver: gpu, Devices: 3}}},
		{Domain: clique + "=b", Nodes: 1, IdleNodes: 1, FreeDevices: []v1alpha1.DriverDevices{{Driver: gpu, Devices: 1}}},
	}
	if diff := cmp.Diff(want, got); size != 2 || diff != "" {
		t.Errorf("unit size %d, units (-want +got):\n%s", size, diff)
	}
	if size, got := units(plain, rooms); size != 0 || got != nil {
		t.Errorf("a group without units: size %d, units %v", size, got)
	}
}
