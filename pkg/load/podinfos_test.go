package load

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	simsnapshot "github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A pod's PodInfo is kept while the informer hands out the same object;
// a changed pod (a new object) gets a new one, and pods gone are dropped.
func TestPodInfosKeptByPointer(t *testing.T) {
	ctx := context.Background()
	a, b := builder.Pod("ns", "a").Node("n").CPU("1").Obj(), builder.Pod("ns", "b").Node("n").CPU("2").Obj()
	c := NewPodInfos()
	first := c.of(ctx, []*corev1.Pod{a, b}, []*corev1.Pod{a, b})
	if first[0] == nil || first[0].GetPod() != a || first[1].GetPod() != b {
		t.Fatalf("PodInfos %v are not the pods'", first)
	}
	resized := b.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests = builder.Pod("ns", "b").CPU("3").Obj().Spec.Containers[0].Resources.Requests
	second := c.of(ctx, []*corev1.Pod{a, resized}, []*corev1.Pod{a, resized})
	if second[0] != first[0] {
		t.Error("an unchanged pod's PodInfo was made again")
	}
	if second[1] == first[1] || second[1].GetPod() != resized {
		t.Error("a changed pod kept the old PodInfo")
	}
	if got := second[1].CalculateResource().Resource.GetMilliCPU(); got != 3000 {
		t.Errorf("the changed pod requests %dm CPU, want 3000m", got)
	}
	if _, kept := c.kept[b]; kept || len(c.kept) != 2 {
		t.Errorf("kept %d PodInfos (old b among them: %v), want a's and the new b's", len(c.kept), kept)
	}
}

// A snapshot built with PodInfos kept from the last pass is the one built
// afresh: the nodes' requests and pods match.
func TestBuildWithKeptPodInfos(t *testing.T) {
	ctx := klog.NewContext(context.Background(), klog.Background())
	state := &observe.ClusterState{
		Nodes: []*corev1.Node{builder.Node("a").CPU("8").Obj(), builder.Node("b").CPU("8").Obj()},
		Pods: []*corev1.Pod{builder.Pod("ns", "on-a").Node("a").CPU("1").Obj(), builder.Pod("ns", "on-b").Node("b").CPU("2").Obj(),
			builder.Pod("ns", "nominated-to-b").CPU("3").Nominated("b").Obj(), builder.Pod("ns", "pending").CPU("1").Obj()},
	}
	requested := func(infos *PodInfos) map[string]int64 {
		snap := simsnapshot.New(klog.Background())
		if err := Prepare(ctx, snap, state); err != nil {
			t.Fatal(err)
		}
		if _, err := Build(ctx, snap, state, nil, Options{PodInfos: infos}); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, n := range []string{"a", "b"} {
			ni, err := snap.NodeInfos().Get(n)
			if err != nil {
				t.Fatal(err)
			}
			out[n] = ni.GetRequested().GetMilliCPU()*10 + int64(len(ni.GetPods()))
		}
		return out
	}
	want := requested(nil)
	if want["a"] != 10001 || want["b"] != 50002 {
		t.Fatalf("fresh build: %v, want a 1000m/1 pod and b 5000m/2 pods", want)
	}
	infos := NewPodInfos()
	for pass := range 2 {
		if got := requested(infos); got["a"] != want["a"] || got["b"] != want["b"] {
			t.Errorf("pass %d with kept PodInfos: %v, want %v", pass, got, want)
		}
	}
}

// Warm makes PodInfos ahead of a pass, which then uses them, for pending
// pods too (fit-existing and the estimator take theirs with Of); finished
// pods get none. The pass drops what belongs to no pod it lists.
func TestPodInfosWarm(t *testing.T) {
	ctx := context.Background()
	bound := builder.Pod("ns", "bound").Node("n").CPU("1").Obj()
	gone := builder.Pod("ns", "gone").Node("n").CPU("1").Obj()
	pending := builder.Pod("ns", "pending").CPU("1").Obj()
	done := builder.Pod("ns", "done").Node("n").CPU("1").Obj()
	done.Status.Phase = corev1.PodSucceeded
	c := NewPodInfos()
	for _, p := range []*corev1.Pod{bound, gone, pending, done} {
		c.Warm(p)
	}
	if len(c.kept) != 3 || c.kept[bound] == nil || c.kept[gone] == nil || c.kept[pending] == nil {
		t.Fatalf("warmed %d PodInfos, want the three unfinished pods'", len(c.kept))
	}
	warmBound, warmPending := c.kept[bound], c.kept[pending]
	got := c.of(ctx, []*corev1.Pod{bound}, []*corev1.Pod{bound, pending})
	if got[0] != warmBound {
		t.Error("the pass made a bound pod's PodInfo again instead of using the warmed one")
	}
	if _, kept := c.kept[gone]; kept || len(c.kept) != 2 {
		t.Errorf("kept %d PodInfos after the pass (the gone pod's among them: %v), want the listed pods'", len(c.kept), kept)
	}
	if c.Of(pending) != warmPending {
		t.Error("Of made a pending pod's PodInfo again instead of using the warmed one")
	}
	late := builder.Pod("ns", "late").CPU("2").Obj()
	first := c.Of(late)
	if first == nil || first.GetPod() != late || c.Of(late) != first {
		t.Error("Of did not keep the PodInfo it made")
	}
	var none *PodInfos
	none.Warm(bound) // a loop without a cache warms nothing, and does not panic
	if none.Of(bound) == nil {
		t.Error("a nil cache made no PodInfo")
	}
}

// Requests reads the scheduler's count of a pod's requests: what the
// component helpers sum for it (sidecars and overhead included), as the
// least-waste expander summed them before.
func TestPodInfosRequests(t *testing.T) {
	sidecar := builder.Pod("ns", "sidecar").CPU("1").Memory("1Gi").Obj()
	always := corev1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}
	overhead := builder.Pod("ns", "overhead").CPU("2").Obj()
	overhead.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	c := NewPodInfos()
	for _, tc := range []struct {
		pod      *corev1.Pod
		cpu, mem int64
	}{
		{builder.Pod("ns", "plain").CPU("1500m").Memory("2Gi").Obj(), 1500, 2 << 30},
		{builder.Pod("ns", "none").Obj(), 0, 0},
		{sidecar, 1500, 1<<30 + 256<<20},
		{overhead, 2250, 0},
	} {
		cpu, mem, ok := c.Requests(tc.pod)
		want := resourcehelper.PodRequests(tc.pod, resourcehelper.PodResourcesOptions{})
		if !ok || cpu != tc.cpu || mem != tc.mem || cpu != want.Cpu().MilliValue() || mem != want.Memory().Value() {
			t.Errorf("pod %s: %d mCPU, %d bytes (ok %v); want %d, %d", tc.pod.Name, cpu, mem, ok, tc.cpu, tc.mem)
		}
	}
}
