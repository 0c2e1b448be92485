package framework

import (
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func gpuSlice(node string, n int) *resourceapi.ResourceSlice {
	b := builder.ResourceSlice(node+"-gpus", node, gpuDriver, node)
	for i := range n {
		b.Devices(builder.Device("gpu-" + string(rune('0'+i))))
	}
	return b.Obj()
}

func TestExtendedResourceBackedByDRA(t *testing.T) {
	gpuPod := func(name string) *v1.Pod {
		return builder.Pod(ns, name).Request("example.com/gpu", "1").Obj()
	}
	runScenarios(t, []scenario{{
		name: "two DRA GPUs serve example.com/gpu on a node without that allocatable",
		objects: []any{
			builder.DeviceClass("gpu").Driver(gpuDriver).ExtendedResource("example.com/gpu").Obj(),
			builder.Node("n1").Obj(), gpuSlice("n1", 2),
		},
		nodes: []string{"n1"},
		steps: []step{
			{pod: gpuPod("a"), wantNode: "n1"},
			{pod: gpuPod("b"), wantNode: "n1"},
			{pod: gpuPod("c"), wantPlugin: names.DynamicResources},
		},
		check: func(t *testing.T, s snapshot.ClusterSnapshot) {
			for _, name := range []string{"a", "b"} {
				claims := s.ClaimsOwnedBy(gpuPod(name).UID)
				if len(claims) != 1 || claims[0].Status.Allocation == nil ||
					claims[0].Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" ||
					!strings.HasPrefix(claims[0].Name, name+"-extended-resources-") {
					t.Fatalf("pod %s: extended resource claims %v, want one allocated, named after the pod", name, claims)
				}
			}
			if len(s.InFlightClaims()) != 0 {
				t.Fatalf("in-flight allocations left behind: %v", s.InFlightClaims())
			}
		},
	}})
}

func TestClaimsSharedAndPreallocated(t *testing.T) {
	shared := builder.Claim(ns, "shared").Request(builder.Request("gpu", "gpu")).Obj()
	p1 := builder.Pod(ns, "p1").Claim("gpu", "shared").Obj()
	p2 := builder.Pod(ns, "p2").Claim("gpu", "shared").Obj()
	// Claim "pinned" is already allocated to n1's only GPU in the cluster.
	pinned := builder.Claim(ns, "pinned").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", gpuDriver, "n1", "gpu-0")).Obj()
	oneGPU := builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()
	runScenarios(t, []scenario{
		{
			name:    "two pods share one claim and one GPU; a third claim finds no GPU",
			objects: []any{builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), builder.Node("n1").Obj(), gpuSlice("n1", 1), shared, oneGPU},
			nodes:   []string{"n1"},
			steps: []step{
				{pod: p1, wantNode: "n1"},
				{pod: p2, wantNode: "n1"},
				{pod: claimPods("own", "one-gpu", 1)[0], wantPlugin: names.DynamicResources},
			},
			check: func(t *testing.T, s snapshot.ClusterSnapshot) {
				c, err := s.ResourceClaims().Get(ns, "shared")
				if err != nil {
					t.Fatal(err)
				}
				if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 2 ||
					c.Status.ReservedFor[0].UID != p1.UID || c.Status.ReservedFor[1].UID != p2.UID {
					t.Fatalf("shared claim status %+v, want allocated and reserved for p1 and p2", c.Status)
				}
			},
		},
		{
			name: "a pod of an allocated claim goes to the claim's node; its device is taken",
			objects: []any{builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
				builder.Node("n1").Obj(), gpuSlice("n1", 1), builder.Node("n2").Obj(), gpuSlice("n2", 1), pinned, oneGPU},
			nodes: []string{"n1", "n2"},
			steps: []step{
				{pod: builder.Pod(ns, "fresh").ClaimFromTemplate("gpu", "one-gpu").Obj(), wantNode: "n2"},
				{pod: builder.Pod(ns, "user").Claim("gpu", "pinned").Obj(), wantNode: "n1"},
			},
			check: func(t *testing.T, s snapshot.ClusterSnapshot) {
				c, _ := s.ResourceClaims().Get(ns, "pinned")
				if len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Name != "user" {
					t.Fatalf("pinned claim reservedFor %v, want the user pod", c.Status.ReservedFor)
				}
			},
		},
	})
}

func TestPinnedClaimRejectsOtherNodes(t *testing.T) {
	r, ctx := newRunner(t, "")
	snapshottest.Load(t, r.Snapshot(), builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.Node("n1").Obj(), gpuSlice("n1", 1), builder.Node("n2").Obj(), gpuSlice("n2", 1),
		builder.Claim(ns, "pinned").Request(builder.Request("gpu", "gpu")).
			Allocated("n1", builder.AllocatedDevice("gpu", gpuDriver, "n1", "gpu-0")).Obj())
	res, err := r.RunFilters(ctx, builder.Pod(ns, "user").Claim("gpu", "pinned").Obj(), []string{"n2", "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Fits || res[0].Plugin != names.DynamicResources || !res[1].Fits {
		t.Fatalf("results %+v, want n2 rejected by DynamicResources and n1 accepted", res)
	}
}

func TestSimulatedTemplateClaims(t *testing.T) {
	r, ctx := newRunner(t, "")
	s := r.Snapshot()
	snapshottest.Load(t, s, builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), builder.Node("n1").Obj(), gpuSlice("n1", 2),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
	pod := builder.Pod(ns, "trainer-0").ClaimFromTemplate("gpu", "one-gpu").Obj()
	p, err := r.SchedulePod(ctx, pod, []string{"n1"})
	if err != nil || p.Node != "n1" {
		t.Fatalf("placement %+v, err %v", p, err)
	}
	st := p.Pod.Status.ResourceClaimStatuses
	if len(st) != 1 || st[0].Name != "gpu" || !strings.HasPrefix(*st[0].ResourceClaimName, "trainer-0-gpu-") ||
		len(*st[0].ResourceClaimName) != len("trainer-0-gpu-")+5 {
		t.Fatalf("claim statuses %+v, want one generated like the controller does", st)
	}
	if len(pod.Status.ResourceClaimStatuses) != 0 {
		t.Fatal("the caller's pod was modified")
	}
	c, err := s.ResourceClaims().Get(ns, *st[0].ResourceClaimName)
	if err != nil || c.Annotations[resourceapi.PodResourceClaimAnnotation] != "gpu" || c.OwnerReferences[0].UID != pod.UID {
		t.Fatalf("claim %+v, err %v; want it owned by the pod with the pod-claim-name annotation", c, err)
	}

	// The same pod in a fresh runner gets the same claim name.
	r2, ctx2 := newRunner(t, "")
	snapshottest.Load(t, r2.Snapshot(), builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), builder.Node("n1").Obj(), gpuSlice("n1", 2),
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
	p2, err := r2.SchedulePod(ctx2, pod, []string{"n1"})
	if err != nil || *p2.Pod.Status.ResourceClaimStatuses[0].ResourceClaimName != *st[0].ResourceClaimName {
		t.Fatalf("second run: %+v, err %v; want the same claim name", p2, err)
	}

	// A template that is not in the snapshot leaves the claim missing: the
	// DRA plugin reports it, no error.
	res, err := r.RunFilters(ctx, builder.Pod(ns, "lost").ClaimFromTemplate("gpu", "absent").Obj(), []string{"n1"})
	if err != nil || res[0].Fits || res[0].Plugin != names.DynamicResources {
		t.Fatalf("results %+v, err %v; want DynamicResources to reject", res, err)
	}

	// Undefaulted in-memory claims are defaulted before the allocator sees them.
	raw := builder.Claim(ns, "raw").Request(builder.Request("gpu", "gpu")).Obj()
	raw.Spec.Devices.Requests[0].Exactly.AllocationMode, raw.Spec.Devices.Requests[0].Exactly.Count = "", 0
	snapshottest.Load(t, s, raw)
	if p, err := r.SchedulePod(ctx, builder.Pod(ns, "raw-user").Claim("gpu", "raw").Obj(), []string{"n1"}); err != nil || p.Node != "n1" {
		t.Fatalf("undefaulted claim: placement %+v, err %v", p, err)
	}
}

func TestGenericWorkloadGangMember(t *testing.T) {
	r, ctx := newRunner(t, "GenericWorkload=true")
	t.Cleanup(func() {
		if err := ApplyFeatureGates("GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	s := r.Snapshot()
	snapshottest.Load(t, s, builder.Node("n1").CPU("2").Obj(), builder.PodGroup(ns, "train").MinCount(2).Obj())
	members := []*v1.Pod{
		builder.Pod(ns, "w-0").CPU("1").PodGroup("train").Obj(),
		builder.Pod(ns, "w-1").CPU("1").PodGroup("train").Obj(),
		builder.Pod(ns, "w-2").CPU("1").PodGroup("train").Obj(),
	}
	snapshottest.Load(t, s, members[0], members[1], members[2])
	for i, want := range []string{"n1", "n1", ""} {
		p, err := r.SchedulePod(ctx, members[i], []string{"n1"})
		if err != nil || p.Node != want {
			t.Fatalf("member %d: placement %+v, err %v; want node %q", i, p, err, want)
		}
	}
	state, err := s.PodGroupStates().Get(ns, "train")
	if err != nil {
		t.Fatal(err)
	}
	if state.AllPodsCount() != 3 || len(state.AssumedPods()) != 2 || len(state.UnscheduledPods()) != 1 {
		t.Fatalf("group state: all %d assumed %d unscheduled %d, want 3/2/1",
			state.AllPodsCount(), len(state.AssumedPods()), len(state.UnscheduledPods()))
	}
}
