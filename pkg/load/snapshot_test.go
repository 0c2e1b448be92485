package load

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
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

// Pending pods held on a node with claims are placed through the
// framework, so their claims hold the node's devices: the second pod
// nominated for a node with one GPU does not fit there any more and is
// pending (Unheld), instead of both looking placed while the GPU looks
// free to every other pod. Held pods without claims keep their place, and
// so does a pod its node cannot take even alone (it waits for a
// preemption's victim to go).
func TestBuildPlacesHeldPodsWithTheirClaims(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gpuPod := func(name, claim, node string) *corev1.Pod {
		return builder.Pod("ns", name).UID(types.UID(name)).Claim("gpu", claim).Nominated(node).Obj()
	}
	// A running pod holds c's only GPU; the scheduler nominated a pod
	// for c that preempts it.
	victim := builder.Pod("ns", "victim").UID("victim").Claim("gpu", "cv").Node("c").Obj()
	state := &observe.ClusterState{
		Nodes: []*corev1.Node{builder.Node("a").CPU("8").Obj(), builder.Node("b").CPU("8").Obj(), builder.Node("c").CPU("8").Obj()},
		// Listed out of order: the first by name wins the node.
		Pods: []*corev1.Pod{gpuPod("second", "c2", "a"), gpuPod("first", "c1", "a"),
			builder.Pod("ns", "cpu-only").CPU("1").Nominated("b").Obj(),
			victim, gpuPod("preemptor", "cp", "c")},
		ResourceSlices: []*resourceapi.ResourceSlice{
			builder.ResourceSlice("a-gpus", "a", "gpu.example.com", "a").Devices(builder.Device("gpu-0")).Obj(),
			builder.ResourceSlice("b-gpus", "b", "gpu.example.com", "b").Devices(builder.Device("gpu-0")).Obj(),
			builder.ResourceSlice("c-gpus", "c", "gpu.example.com", "c").Devices(builder.Device("gpu-0")).Obj(),
		},
		ResourceClaims: []*resourceapi.ResourceClaim{
			builder.Claim("ns", "c1").Request(builder.Request("gpu", "gpu")).Obj(),
			builder.Claim("ns", "c2").Request(builder.Request("gpu", "gpu")).Obj(),
			builder.Claim("ns", "cv").Request(builder.Request("gpu", "gpu")).
				Allocated("c", builder.AllocatedDevice("gpu", "gpu.example.com", "c", "gpu-0")).ReservedFor(victim).Obj(),
			builder.Claim("ns", "cp").Request(builder.Request("gpu", "gpu")).Obj(),
		},
		DeviceClasses: []*resourceapi.DeviceClass{builder.DeviceClass("gpu").Driver("gpu.example.com").Obj()},
	}
	snap := runner.Snapshot()
	if err := Prepare(ctx, snap, state); err != nil {
		t.Fatal(err)
	}
	res, err := Build(ctx, snap, state, nil, Options{Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	if placed, ok := snap.PlacedPod("ns", "first"); !ok || placed.Spec.NodeName != "a" {
		t.Errorf("the first held pod is not on its node a: %v", placed)
	}
	if c, _ := snap.ResourceClaim("ns", "c1"); c == nil || c.Status.Allocation == nil {
		t.Errorf("the first held pod's claim holds no device: %+v", c)
	}
	if len(res.Unheld) != 1 || res.Unheld[0].Name != "second" {
		t.Errorf("unheld = %v, want the second pod", res.Unheld)
	}
	if _, ok := snap.PendingPod("ns", "second"); !ok {
		t.Error("the second pod is not pending in the snapshot")
	}
	if placed, ok := snap.PlacedPod("ns", "cpu-only"); !ok || placed.Spec.NodeName != "b" {
		t.Errorf("the held pod without claims lost its place on b: %v", placed)
	}
	if placed, ok := snap.PlacedPod("ns", "preemptor"); !ok || placed.Spec.NodeName != "c" {
		t.Errorf("the pod waiting for a preemption on c lost its place: %v", placed)
	}
	// What the unheld pod needs is free on b, not on a.
	verdicts, err := runner.RunFilters(ctx, state.Pods[0], []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if verdicts[0].Fits || !verdicts[1].Fits {
		t.Errorf("the second pod fits a: %v, b: %v; want only b", verdicts[0].Fits, verdicts[1].Fits)
	}
}

func TestSkipNamesWhatIsLeftOut(t *testing.T) {
	failed := errors.New("no such node")
	for _, tc := range []struct {
		name, kind, namespace, object string
		err                           error
		want                          string // "" for nothing logged
	}{
		{name: "namespaced", kind: "pod", namespace: "ml", object: "train-0", err: failed, want: `object="pod/ml/train-0"`},
		{name: "cluster-scoped", kind: "node", object: "gpu-1", err: failed, want: `object="node/gpu-1"`},
		{name: "a kind alone", kind: "resourceclaims", err: failed, want: `object="resourceclaims"`},
		{name: "loaded", kind: "pod", namespace: "ml", object: "train-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(4)))
			skip(logger, tc.kind, tc.namespace, tc.object, tc.err)
			got := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if tc.want == "" {
				if got != "" {
					t.Fatalf("logged %q for an object that was loaded", got)
				}
				return
			}
			if !strings.Contains(got, "Left out of the snapshot") || !strings.Contains(got, tc.want) || !strings.Contains(got, failed.Error()) {
				t.Fatalf("logged %q, want the message with %s and the error", got, tc.want)
			}
		})
	}
}
