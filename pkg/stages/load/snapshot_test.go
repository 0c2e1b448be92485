package load

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/observe"
	simsnapshot "github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestBuild(t *testing.T) {
	gpuSlice := func(name, node string) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(name, node, "gpu.example.com", node).Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	}
	tmpl := &cloudprovider.NodeTemplate{
		Node:           builder.Node("template-node").CPU("8").Obj(),
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice("t-gpus", "template-node")},
	}
	booting := builder.Node("gpu-booting").NotReady().Obj()
	state := &observe.ClusterState{
		Nodes: []*corev1.Node{builder.Node("b").Obj(), builder.Node("a").Obj(), booting},
		Pods: []*corev1.Pod{
			builder.Pod("ns", "on-a").Node("a").CPU("1").Obj(),
			builder.Pod("ns", "on-booting").Node("gpu-booting").CPU("1").Obj(),
			builder.Pod("ns", "pending").CPU("1").Obj(),
			builder.Pod("ns", "on-missing-node").Node("gone").Obj(),
			// Preempted for anything: not in the snapshot.
			builder.Pod("ns", "expendable-on-b").Node("b").CPU("1").Priority(-11).Obj(),
			// Preemption under way: holds its place on b.
			builder.Pod("ns", "nominated-to-b").CPU("1").Nominated("b").Obj(),
		},
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice("a-gpus", "a")},
		DeviceClasses:  []*resourceapi.DeviceClass{builder.DeviceClass("gpu").Driver("gpu.example.com").Obj()},
	}
	groups := []*nodegroups.Info{{Id: "gpu", Target: 3, Booting: []*corev1.Node{booting}, Template: tmpl}}
	snap := simsnapshot.New(klog.Background())
	// Anything from an earlier loop is dropped.
	if err := snap.AddNode(builder.Node("stale").Obj()); err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), snap, state, groups, Options{ExpendableCutoff: -10})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Candidates(); len(got) != 5 || got[0] != "a" || got[2] != "gpu-booting" || got[3] != "gpu-upcoming-0" {
		t.Fatalf("candidates = %v, want a, b, gpu-booting and 2 upcoming", got)
	}
	nodes, err := snap.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 5 {
		t.Errorf("snapshot has %d nodes, want 5", len(nodes))
	}
	if b, err := snap.NodeInfos().Get("b"); err != nil || len(b.GetPods()) != 1 || b.GetPods()[0].GetPod().Name != "nominated-to-b" {
		t.Errorf("node b: %v, pods %v; want only the nominated pod", err, b)
	}
	a, err := snap.NodeInfos().Get("a")
	if err != nil || len(a.GetPods()) != 1 {
		t.Errorf("node a: %v, pods %d", err, len(a.GetPods()))
	}
	// The booting node looks like the template (Ready, its slices) and
	// keeps its real pods.
	nb, err := snap.NodeInfos().Get("gpu-booting")
	if err != nil || len(nb.GetPods()) != 1 || nb.Node().Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("booting node not simulated as its template: %v", err)
	}
	slices, err := snap.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, s := range slices {
		perNode[*s.Spec.NodeName]++
	}
	for _, n := range []string{"a", "gpu-booting", "gpu-upcoming-0", "gpu-upcoming-1"} {
		if perNode[n] != 1 {
			t.Errorf("node %s has %d slices, want 1 (%v)", n, perNode[n], perNode)
		}
	}
	if res.GroupOf["gpu-upcoming-1"] != "gpu" || res.GroupOf["gpu-booting"] != "gpu" {
		t.Errorf("GroupOf = %v", res.GroupOf)
	}
}

// A booting node past the provision time is no longer coming: it is
// simulated as it is (NotReady, its not-ready taint), not as the template,
// so pending pods do not wait for a dead node.
func TestBuildStaleBootingNodeAsItIs(t *testing.T) {
	tmpl := &cloudprovider.NodeTemplate{Node: builder.Node("template-node").CPU("8").Obj()}
	dead := builder.Node("gpu-dead").NotReady().Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule).Obj()
	state := &observe.ClusterState{Nodes: []*corev1.Node{dead}}
	groups := []*nodegroups.Info{{Id: "gpu", Target: 1, Booting: []*corev1.Node{dead}, Stale: map[string]bool{"gpu-dead": true}, Template: tmpl}}
	snap := simsnapshot.New(klog.Background())
	res, err := Build(context.Background(), snap, state, groups, Options{ExpendableCutoff: -10})
	if err != nil {
		t.Fatal(err)
	}
	n, err := snap.NodeInfos().Get("gpu-dead")
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Node().Spec.Taints) != 1 || res.GroupOf["gpu-dead"] != "" {
		t.Errorf("stale node simulated as template: taints %v, group %q", n.Node().Spec.Taints, res.GroupOf["gpu-dead"])
	}
}
