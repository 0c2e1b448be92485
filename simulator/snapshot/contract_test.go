package snapshot

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The interfaces pinned by k8s.io/kubernetes
// pkg/scheduler/framework/autoscaler_contract/lister_contract_test.go, as
// the framework receives them.
var (
	_ fwk.NodeInfoLister               = (&Snapshot{}).NodeInfos()
	_ fwk.StorageInfoLister            = (&Snapshot{}).StorageInfos()
	_ fwk.SharedLister                 = &Snapshot{}
	_ fwk.ResourceSliceLister          = (&Snapshot{}).ResourceSlices()
	_ fwk.PodGroupStateLister          = (&Snapshot{}).PodGroupStates()
	_ fwk.PodGroupLister               = (&Snapshot{}).PodGroups()
	_ fwk.CompositePodGroupStateLister = (&Snapshot{}).CompositePodGroupStates()
	_ fwk.CompositePodGroupLister      = (&Snapshot{}).CompositePodGroups()
	_ fwk.DeviceClassLister            = (&Snapshot{}).DeviceClasses()
	_ fwk.ResourceClaimTracker         = (&Snapshot{}).ResourceClaims()
	_ fwk.DeviceClassResolver          = (&Snapshot{}).DeviceClassResolver()
	_ fwk.SharedDRAManager             = &Snapshot{}
	_ fwk.PodGroupManager              = &Snapshot{}
	_ fwk.MutableSnapshotSharedLister  = (&Snapshot{}).MutableLister()
)

// TestListerContract walks every method of the pinned contract on a small
// cluster and checks the answer the framework relies on.
func TestListerContract(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	s := New(logger)
	s.gates.genericWorkload = true
	pod := builder.Pod("ns", "p").PodGroup("g").Obj()
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "pvc"}}}}
	claim := builder.Claim("ns", "c").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", "gpu.example.com", "n1", "gpu-0")).Obj()
	mustOK(t, s.AddNode(builder.Node("n1").Obj()))
	mustOK(t, s.AddPod(pod, "n1"))
	mustOK(t, s.SetResourceSlice(builder.ResourceSlice("s1", "n1", "gpu.example.com", "n1").Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()))
	mustOK(t, s.SetDeviceTaintRule(builder.DeviceTaintRule("r", "k", "v", resourceapi.DeviceTaintEffectNoSchedule).Device("gpu-1").Obj()))
	mustOK(t, s.SetDeviceClass(builder.DeviceClass("gpu").Driver("gpu.example.com").ExtendedResource("example.com/gpu").Obj()))
	mustOK(t, s.SetResourceClaim(claim))
	mustOK(t, s.SetPodGroup(builder.PodGroup("ns", "g").MinCount(1).Obj()))

	var shared fwk.SharedLister = s
	if l, _ := shared.NodeInfos().List(); len(l) != 1 {
		t.Errorf("List() = %d nodes, want 1", len(l))
	}
	if ni, err := shared.NodeInfos().Get("n1"); err != nil || len(ni.GetPods()) != 1 {
		t.Errorf("Get(n1) = %v, %v", ni, err)
	}
	if _, err := shared.NodeInfos().Get("absent"); err == nil {
		t.Error("Get(absent) must fail")
	}
	for _, f := range []func() ([]fwk.NodeInfo, error){shared.NodeInfos().HavePodsWithAffinityList,
		shared.NodeInfos().HavePodsWithRequiredAntiAffinityList, shared.NodeInfos().HavePodsWithRequiredNonHostScopedAntiAffinityList} {
		if l, err := f(); err != nil || len(l) != 0 {
			t.Errorf("affinity list = %v, %v; want empty", l, err)
		}
	}
	if !shared.StorageInfos().IsPVCUsedByPods("ns/pvc") || shared.StorageInfos().IsPVCUsedByPods("ns/other") {
		t.Error("IsPVCUsedByPods does not follow the pod's volumes")
	}
	if st, err := shared.PodGroupStates().Get("ns", "g"); err != nil || st.AllPodsCount() != 1 || st.ScheduledPodsCount() != 1 || len(st.AssumedPods()) != 1 {
		t.Errorf("PodGroupStates().Get = %v, %v", st, err)
	}
	if pg, err := shared.PodGroups().Get("ns", "g"); err != nil || pg.Name != "g" {
		t.Errorf("PodGroups().Get = %v, %v", pg, err)
	}
	if _, err := shared.CompositePodGroups().Get("ns", "x"); err == nil {
		t.Error("CompositePodGroups().Get must fail: gate off")
	}
	if _, err := shared.CompositePodGroupStates().Get("ns", "x"); err == nil {
		t.Error("CompositePodGroupStates().Get of an unknown group must fail")
	}

	var dra fwk.SharedDRAManager = s
	slices, _ := dra.ResourceSlices().ListWithDeviceTaintRules()
	if len(slices) != 1 || len(slices[0].Spec.Devices[0].Taints) != 0 || len(slices[0].Spec.Devices[1].Taints) != 1 {
		t.Errorf("ListWithDeviceTaintRules = %+v, want the rule's taint on gpu-1 only", slices)
	}
	if c, err := dra.DeviceClasses().Get("gpu"); err != nil || c.Name != "gpu" {
		t.Errorf("DeviceClasses().Get = %v, %v", c, err)
	}
	if l, _ := dra.DeviceClasses().List(); len(l) != 1 {
		t.Errorf("DeviceClasses().List = %v", l)
	}
	for name, want := range map[v1.ResourceName]bool{"example.com/gpu": true, "deviceclass.resource.kubernetes.io/gpu": true, "example.com/fpga": false} {
		if got := dra.DeviceClassResolver().GetDeviceClass(name) != nil; got != want {
			t.Errorf("GetDeviceClass(%s) found = %v, want %v", name, got, want)
		}
	}
	tracker := dra.ResourceClaims()
	if l, _ := tracker.List(); len(l) != 1 {
		t.Errorf("claims List = %v", l)
	}
	if devs, _ := tracker.ListAllAllocatedDevices(); devs.Len() != 1 {
		t.Errorf("ListAllAllocatedDevices = %v", devs)
	}
	pending := builder.Claim("ns", "d").Request(builder.Request("gpu", "gpu")).
		Allocated("n1", builder.AllocatedDevice("gpu", "gpu.example.com", "n1", "gpu-1")).Obj()
	mustOK(t, s.SetResourceClaim(builder.Claim("ns", "d").Request(builder.Request("gpu", "gpu")).Obj()))
	mustOK(t, tracker.SignalClaimPendingAllocation(pending.UID, pending))
	mustOK(t, tracker.SignalClaimPendingAllocation(pending.UID, pending))
	if state, _ := tracker.GatherAllocatedState(); state.AllocatedDevices.Len() != 2 || tracker.GetPendingAllocation(pending.UID) == nil {
		t.Errorf("pending allocation not reflected: %v", state)
	}
	if tracker.MaybeRemoveClaimPendingAllocation(pending.UID, false) || !tracker.MaybeRemoveClaimPendingAllocation(pending.UID, false) {
		t.Error("two sharers need two removals")
	}
	mustOK(t, tracker.AssumeClaimAfterAPICall(pending))
	if c, _ := tracker.Get("ns", "d"); c.Status.Allocation == nil {
		t.Error("assumed claim not visible")
	}
	tracker.AssumedClaimRestore("ns", "d")
	if c, _ := tracker.Get("ns", "d"); c.Status.Allocation != nil {
		t.Error("AssumedClaimRestore did not restore")
	}

	var pgm fwk.PodGroupManager = s
	if m, err := pgm.BuildHierarchySnapshotFromPod(pod); err != nil || m == nil {
		t.Errorf("BuildHierarchySnapshotFromPod = %v, %v", m, err)
	}
	if root, ok, err := pgm.GetRootKeyForGroup(fwk.PodGroupKey("ns", "g")); err != nil || !ok || root != fwk.PodGroupKey("ns", "g") {
		t.Errorf("GetRootKeyForGroup = %v %v %v", root, ok, err)
	}

	ml := s.MutableLister()
	if err := ml.AddPod(&schedframework.PodInfo{Pod: pod}, "n1"); err == nil {
		t.Error("AddPod outside a session must fail")
	}
	mustOK(t, ml.StartMutations())
	mustOK(t, ml.RemovePod(logger, pod, "n1"))
	if ni, _ := s.Get("n1"); len(ni.GetPods()) != 0 {
		t.Error("RemovePod in session not visible")
	}
	mustOK(t, ml.EndMutations())
	if ni, _ := s.Get("n1"); len(ni.GetPods()) != 1 {
		t.Error("EndMutations did not restore the pod")
	}
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
