package kwok

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A restarted provider finds the nodes of its groups by label, publishes
// slices an adopted node lacks, and drops nodes deleted behind its back.
func TestRefreshRebuildsState(t *testing.T) {
	gpu, cpu := gpuGroup("gpu", 0, 10), cpuGroup("cpu", 0, 10)
	withSlices, withoutSlices, cpuNode := gpu.buildNode("gpu-aaaaa"), gpu.buildNode("gpu-bbbbb"), cpu.buildNode("cpu-ccccc")
	objs := []runtime.Object{withSlices, withoutSlices, cpuNode,
		builder.Node("other").Label(LabelNodeGroup, "unknown").Obj(), builder.Node("control-plane").Obj()}
	for _, s := range gpu.buildSlices(withSlices.Name) {
		objs = append(objs, s)
	}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{gpu, cpu}}, objs...)
	ng, cpuNG := e.group(t, "gpu"), e.group(t, "cpu")
	if got := targetSize(t, ng); got != 0 {
		t.Fatalf("target before Refresh = %d, want 0", got)
	}

	if err := e.p.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if got, got2 := targetSize(t, ng), targetSize(t, cpuNG); got != 2 || got2 != 1 {
		t.Errorf("targets after Refresh = %d, %d, want 2, 1", got, got2)
	}
	if r, c, f := states(t, ng); r != 2 || c != 0 || f != 0 {
		t.Errorf("running %d creating %d failed %d, want 2 0 0", r, c, f)
	}
	eventually(t, "slices republished", func() bool { return len(e.slices(t, withoutSlices.Name)) == 2 })
	if n := len(e.slices(t, withSlices.Name)); n != 2 {
		t.Errorf("%d slices on %s, want 2 (no duplicates)", n, withSlices.Name)
	}
	for _, node := range []*corev1.Node{withSlices, withoutSlices} {
		if has, _ := e.p.HasInstance(node); !has {
			t.Errorf("HasInstance(%s) = false after adoption", node.Name)
		}
	}

	if err := e.client.CoreV1().Nodes().Delete(context.Background(), withSlices.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Refresh reads the provider's watch of the nodes: the deletion is
	// seen once the watch delivers it.
	eventually(t, "the outside deletion seen by Refresh", func() bool {
		if err := e.p.Refresh(t.Context()); err != nil {
			t.Fatalf("second Refresh: %v", err)
		}
		return targetSize(t, ng) == 1
	})
	if has, _ := e.p.HasInstance(withSlices); has {
		t.Errorf("HasInstance(%s) = true after its node was deleted", withSlices.Name)
	}
}

// Refresh reads the nodes from a watch that may lag: a node that
// registered but that the watch has not delivered yet is kept (the API
// server is asked), and one the API server no longer has is dropped. The
// watch here delivers nothing after its first LIST, so the lag is sure.
func TestRefreshAsksForNodesTheWatchLacks(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.BootDelay = metav1.Duration{Duration: time.Hour}
	e := &env{cfg: &Config{NodeGroups: []NodeGroupConfig{g}}, client: fake.NewClientset(), clock: testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	e.client.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	e.start(t)
	ng := e.group(t, "gpu")
	if err := e.p.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := ng.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.p.mu.Lock()
	var inst *instance
	for _, i := range ng.instances {
		inst = i
	}
	e.p.mu.Unlock()
	// What the boot goroutine does: the Node, then the record.
	if _, err := e.client.CoreV1().Nodes().Create(t.Context(), g.buildNode(inst.name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ng.markRegistered(inst)
	if err := e.p.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, ng); got != 1 {
		t.Fatalf("target = %d, want 1: a registered node the watch has not shown was dropped", got)
	}
	if err := e.client.CoreV1().Nodes().Delete(t.Context(), inst.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := targetSize(t, ng); got != 0 {
		t.Errorf("target = %d, want 0: the node is gone from the API server", got)
	}
}

func TestNodeGroupForNode(t *testing.T) {
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{gpuGroup("gpu", 0, 1), cpuGroup("cpu", 0, 1)}})
	tests := []struct {
		name string
		node *corev1.Node
		want string
	}{
		{"by label", builder.Node("x").Label(LabelNodeGroup, "cpu").Obj(), "cpu"},
		{"by providerID", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-abcde"}, Spec: corev1.NodeSpec{ProviderID: "kwok://gpu/gpu-abcde"}}, "gpu"},
		{"placeholder named by providerID", fakeNode("kwok://cpu/cpu-abcde"), "cpu"},
		{"unknown group", builder.Node("x").Label(LabelNodeGroup, "tpu").Obj(), ""},
		{"foreign node", builder.Node("control-plane").Obj(), ""},
		{"other provider", fakeNode("aws:///us-east-1a/i-0123"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := e.p.NodeGroupForNode(tc.node)
			if err != nil {
				t.Fatalf("NodeGroupForNode: %v", err)
			}
			got := ""
			if g != nil {
				got = g.Id()
			}
			if got != tc.want {
				t.Errorf("group = %q, want %q", got, tc.want)
			}
		})
	}
	if has, err := e.p.HasInstance(builder.Node("control-plane").Obj()); !has || err != nil {
		t.Errorf("HasInstance(foreign node) = %t, %v; want true: not ours to judge", has, err)
	}
}

func TestProviderBasics(t *testing.T) {
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{gpuGroup("gpu", 1, 3), cpuGroup("cpu", 0, 5)}})
	if e.p.Name() != "kwok" {
		t.Errorf("Name = %q", e.p.Name())
	}
	groups := e.p.NodeGroups()
	if len(groups) != 2 || groups[0].Id() != "gpu" || groups[0].MinSize() != 1 || groups[0].MaxSize() != 3 || groups[1].Id() != "cpu" {
		t.Errorf("NodeGroups = %v", groups)
	}
	if got := groups[0].Debug(); got != "gpu (min 1, max 3, target 0)" {
		t.Errorf("Debug = %q", got)
	}
	if rl, err := e.p.GetResourceLimiter(); rl != nil || err != nil {
		t.Errorf("GetResourceLimiter = %v, %v; want no limits", rl, err)
	}
	if _, err := groups[0].GetOptions(cloudprovider.NodeGroupAutoscalingOptions{}); err != cloudprovider.ErrNotImplemented {
		t.Errorf("GetOptions error = %v, want ErrNotImplemented", err)
	}
}

// A group's options config overrides the defaults it sets, no more.
func TestGroupOptions(t *testing.T) {
	gpu := gpuGroup("gpu", 0, 3)
	half := 0.25
	yes := true
	gpu.Options = &GroupOptionsConfig{ScaleDownGPUUtilizationThreshold: &half, ScaleDownUnneededTime: &metav1.Duration{Duration: time.Hour},
		ZeroOrMaxNodeScaling: &yes}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{gpu}})
	defaults := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
		ScaleDownUnneededTime: time.Minute, ScaleDownUnreadyTime: 2 * time.Minute, MaxNodeProvisionTime: 3 * time.Minute}
	got, err := e.p.NodeGroups()[0].GetOptions(defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := defaults
	want.ScaleDownGpuUtilizationThreshold, want.ScaleDownUnneededTime, want.ZeroOrMaxNodeScaling = 0.25, time.Hour, true
	if *got != want {
		t.Errorf("GetOptions = %+v, want %+v", *got, want)
	}
}

// Refresh reads the nodes from the provider's watch: one LIST when it
// starts, none in later passes; a node the watch does not show yet is
// asked for by name before its instance is dropped.
func TestRefreshListsOnce(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}}, g.buildNode("gpu-aaaaa"))
	lists := func() int {
		n := 0
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
				n++
			}
		}
		return n
	}
	for range 3 {
		if err := e.p.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := lists(); n != 1 {
		t.Errorf("%d node LISTs over 3 Refreshes, want 1 (the watch's)", n)
	}
	if got := targetSize(t, e.group(t, "gpu")); got != 1 {
		t.Fatalf("target %d, want the adopted node", got)
	}
}
