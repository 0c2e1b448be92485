package snapshot

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The universe the random operations draw from: small, so that operations
// collide (same node, same claim, same device) often.
const (
	nNodes, nPods, nClaims, nGroups, nRules, nDevices = 4, 10, 6, 2, 2, 4
	driver                                            = "gpu.example.com"
)

// TestForkRevertCommitMatchReference applies random sequences of changes,
// forks, reverts and commits to the snapshot and to the naive reference,
// and after every step requires both to read the same.
func TestForkRevertCommitMatchReference(t *testing.T) {
	for seed := range uint64(150) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			s, ref := New(logger), newReference()
			rnd := rand.New(rand.NewPCG(seed, 0))
			var orders [][]string // List() order at each open Fork
			for step := range 400 {
				name, apply := randomOp(rnd, s, ref)
				if name == "Fork" {
					orders = append(orders, nodeOrder(s))
				}
				errS, errR := apply()
				if (errS == nil) != (errR == nil) {
					t.Fatalf("step %d %s: snapshot error %v, reference error %v", step, name, errS, errR)
				}
				if name == "Revert" && errS == nil {
					want := orders[len(orders)-1]
					orders = orders[:len(orders)-1]
					if got := nodeOrder(s); !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d: node order after Revert %v, before Fork %v", step, got, want)
					}
				}
				if name == "Commit" && errS == nil {
					orders = orders[:len(orders)-1]
				}
				if got, want := viewOfSnapshot(s), viewOfReference(ref); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d %s: snapshot and reference differ\nsnapshot:  %+v\nreference: %+v", step, name, got, want)
				}
			}
		})
	}
}

func nodeOrder(s *Snapshot) []string {
	l, _ := s.List()
	out := make([]string, len(l))
	for i, ni := range l {
		out[i] = ni.Node().Name
	}
	return out
}

func nodeName(i int) string { return fmt.Sprintf("n%d", i) }
func podName(i int) string  { return fmt.Sprintf("p%d", i) }
func podUID(i int) types.UID {
	return types.UID("uid-" + podName(i))
}

// randPod returns pod i with a spec that depends on i only: some have
// affinity, a PVC, a pod group. assignedTo, when set, makes it a pod bound
// in the cluster rather than placed by simulation.
func randPod(i int, assignedTo string) *v1.Pod {
	b := builder.Pod("ns", podName(i)).UID(podUID(i)).CPU(fmt.Sprintf("%dm", 100*(i+1))).Memory(fmt.Sprintf("%dMi", i+1))
	if i%3 != 2 {
		b.PodGroup(fmt.Sprintf("g%d", i%nGroups))
	}
	pod := b.Obj()
	pod.Spec.NodeName = assignedTo
	if i%4 == 0 {
		pod.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			TopologyKey: v1.LabelHostname, LabelSelector: nil,
		}}}}
	}
	if i%5 == 0 {
		pod.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{
			PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("pvc%d", i%2)}}}}
	}
	return pod
}

// randClaim returns claim k, unallocated or allocated to random devices,
// exclusively, as a share with consumed capacity, or with admin access.
func randClaim(rnd *rand.Rand, k int) *resourceapi.ResourceClaim {
	b := builder.Claim("ns", fmt.Sprintf("c%d", k)).Request(builder.Request("gpu", "gpu"))
	// Mostly one owner per claim, as claims made from templates have;
	// sometimes another pod or none, so a write can move a claim between
	// owners in the owner index.
	switch o := rnd.IntN(8); {
	case o < 5 && k%2 == 0:
		b.OwnedByPod(randPod(k%nPods, ""), "gpu")
	case o == 5:
		b.OwnedByPod(randPod((k+1)%nPods, ""), "gpu")
	}
	if rnd.IntN(3) == 0 {
		return b.Obj()
	}
	node := nodeName(rnd.IntN(nNodes))
	var results []resourceapi.DeviceRequestAllocationResult
	for range 1 + rnd.IntN(2) {
		r := builder.AllocatedDevice("gpu", driver, node, fmt.Sprintf("gpu-%d", rnd.IntN(nDevices)))
		switch rnd.IntN(4) {
		case 0:
			r.ShareID = ptr.To(types.UID(fmt.Sprintf("share-%d", rnd.IntN(3))))
			r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(fmt.Sprintf("%dGi", 1+rnd.IntN(4)))}
		case 1:
			r.AdminAccess = ptr.To(true)
		}
		results = append(results, r)
	}
	return b.Allocated(node, results...).Obj()
}

// randomOp picks an operation and returns a function applying it to both
// implementations.
func randomOp(rnd *rand.Rand, s *Snapshot, ref *reference) (string, func() (error, error)) {
	node, pod, claim := rnd.IntN(nNodes), rnd.IntN(nPods), rnd.IntN(nClaims)
	both := func(fs func() error, fr func() error) func() (error, error) {
		return func() (error, error) { return fs(), fr() }
	}
	switch op := rnd.IntN(20); op {
	case 0, 1:
		n := builder.Node(nodeName(node)).Obj()
		return "AddNode", both(func() error { return s.AddNode(n) }, func() error { return ref.AddNode(n) })
	case 2:
		return "RemoveNode", both(func() error { return s.RemoveNode(nodeName(node)) }, func() error { return ref.RemoveNode(nodeName(node)) })
	case 3, 4:
		assigned := ""
		if rnd.IntN(2) == 0 {
			assigned = nodeName(node)
		}
		p := randPod(pod, assigned)
		return "AddPod", both(func() error { return s.AddPod(p, nodeName(node)) }, func() error { return ref.AddPod(p, nodeName(node)) })
	case 5:
		return "RemovePod", both(func() error { return s.RemovePod("ns", podName(pod)) }, func() error { return ref.RemovePod("ns", podName(pod)) })
	case 6:
		p := randPod(pod, "")
		return "AddPendingPod", both(func() error { return s.AddPendingPod(p) }, func() error { return ref.AddPendingPod(p) })
	case 7:
		sb := builder.ResourceSlice(fmt.Sprintf("s-%s-%d", nodeName(node), rnd.IntN(2)), nodeName(node), driver, nodeName(node))
		for d := range nDevices {
			sb.Devices(builder.Device(fmt.Sprintf("gpu-%d", d)))
		}
		sl := sb.Obj()
		return "SetResourceSlice", both(func() error { return s.SetResourceSlice(sl) }, func() error { return ref.SetResourceSlice(sl) })
	case 8:
		name := fmt.Sprintf("s-%s-%d", nodeName(node), rnd.IntN(2))
		return "RemoveResourceSlice", both(func() error { return s.RemoveResourceSlice(name) }, func() error { return ref.RemoveResourceSlice(name) })
	case 9:
		rule := builder.DeviceTaintRule(fmt.Sprintf("r%d", rnd.IntN(nRules)), "k", fmt.Sprint(rnd.IntN(3)), resourceapi.DeviceTaintEffectNoSchedule).
			Pool(nodeName(node)).Device(fmt.Sprintf("gpu-%d", rnd.IntN(nDevices))).Obj()
		return "SetDeviceTaintRule", both(func() error { return s.SetDeviceTaintRule(rule) }, func() error { return ref.SetDeviceTaintRule(rule) })
	case 10:
		name := fmt.Sprintf("r%d", rnd.IntN(nRules))
		return "RemoveDeviceTaintRule", both(func() error { return s.RemoveDeviceTaintRule(name) }, func() error { return ref.RemoveDeviceTaintRule(name) })
	case 11, 12:
		c := randClaim(rnd, claim)
		return "SetResourceClaim", both(func() error { return s.SetResourceClaim(c) }, func() error { return ref.SetResourceClaim(c) })
	case 13:
		name := fmt.Sprintf("c%d", claim)
		return "RemoveResourceClaim", both(func() error { return s.RemoveResourceClaim("ns", name) }, func() error { return ref.RemoveResourceClaim("ns", name) })
	case 14:
		c := randClaim(rnd, claim)
		if c.Status.Allocation == nil {
			c = builder.Claim("ns", c.Name).Allocated(nodeName(node), builder.AllocatedDevice("gpu", driver, nodeName(node), "gpu-0")).Obj()
		}
		return "Signal", both(func() error { return s.ResourceClaims().SignalClaimPendingAllocation(c.UID, c) },
			func() error { ref.signal(c); return nil })
	case 15:
		uid, force := builder.Claim("ns", fmt.Sprintf("c%d", claim)).Obj().UID, rnd.IntN(2) == 0
		return "MaybeRemovePending", func() (error, error) {
			a, b := s.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, force), ref.unsignal(uid, force)
			if a != b {
				return fmt.Errorf("snapshot removed=%v", a), nil
			}
			return nil, nil
		}
	case 16:
		pg := builder.PodGroup("ns", fmt.Sprintf("g%d", rnd.IntN(nGroups))).MinCount(int32(1 + rnd.IntN(3))).Obj()
		return "SetPodGroup", both(func() error { return s.SetPodGroup(pg) }, func() error { return ref.SetPodGroup(pg) })
	case 17, 18:
		return "Fork", both(func() error { s.Fork(); return nil }, func() error { ref.Fork(); return nil })
	default:
		if rnd.IntN(2) == 0 {
			return "Commit", both(s.Commit, ref.Commit)
		}
		return "Revert", both(s.Revert, ref.Revert)
	}
}

func viewOfSnapshot(s *Snapshot) view {
	v := newView()
	list, _ := s.List()
	for _, ni := range list {
		v.Nodes[ni.Node().Name] = describeNode(ni)
	}
	aff, _ := s.HavePodsWithRequiredAntiAffinityList()
	for _, ni := range aff {
		v.Affinity = append(v.Affinity, ni.Node().Name)
	}
	for i := range 2 {
		if key := fmt.Sprintf("ns/pvc%d", i); s.IsPVCUsedByPods(key) {
			v.PVCs = append(v.PVCs, key)
		}
	}
	for i := range nPods {
		if _, ok := s.PendingPod("ns", podName(i)); ok {
			v.Pending = append(v.Pending, podName(i))
		}
		for _, c := range s.ClaimsOwnedBy(podUID(i)) {
			v.OwnedClaims[podName(i)] = append(v.OwnedClaims[podName(i)], c.Name)
		}
	}
	slices, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	for _, sl := range slices {
		v.Slices[sl.Name] = describeTaints(sl)
	}
	claims, _ := s.ResourceClaims().List()
	for _, c := range claims {
		v.Claims[c.Name] = describeClaim(c)
	}
	state, _ := s.ResourceClaims().GatherAllocatedState()
	for id := range state.AllocatedDevices {
		v.Dedicated = append(v.Dedicated, id.String())
	}
	for id := range state.AllocatedSharedDeviceIDs {
		v.Shared = append(v.Shared, id.String())
	}
	for id, cc := range state.AggregatedCapacity {
		v.Capacity[id.String()] = describeCapacity(cc)
	}
	for _, c := range s.InFlightClaims() {
		v.InFlight = append(v.InFlight, c.Name)
	}
	for g := range nGroups {
		if st, err := s.PodGroupStates().Get("ns", fmt.Sprintf("g%d", g)); err == nil {
			v.GroupStates[fmt.Sprintf("g%d", g)] = fmt.Sprintf("all=%d assumed=%d assigned=%d unscheduled=%d",
				st.AllPodsCount(), len(st.AssumedPods()), len(st.AssignedPods()), len(st.UnscheduledPods()))
		}
	}
	return v.canonical()
}

func newView() view {
	return view{Nodes: map[string]string{}, Slices: map[string][]string{}, Claims: map[string]string{},
		Capacity: map[string]string{}, GroupStates: map[string]string{}, OwnedClaims: map[string][]string{}}
}

func (v view) canonical() view {
	for _, l := range [][]string{v.Affinity, v.PVCs, v.Pending, v.Dedicated, v.Shared, v.InFlight} {
		sort.Strings(l)
	}
	for k := range v.OwnedClaims {
		sort.Strings(v.OwnedClaims[k])
	}
	return v
}

func describeNode(ni fwk.NodeInfo) string {
	var pods []string
	for _, p := range ni.GetPods() {
		pods = append(pods, p.GetPod().Name+"@"+p.GetPod().Spec.NodeName)
	}
	sort.Strings(pods)
	r := ni.GetRequested()
	return fmt.Sprintf("pods=%v cpu=%d mem=%d anti=%d pvcs=%v", pods, r.GetMilliCPU(), r.GetMemory(),
		len(ni.GetPodsWithRequiredAntiAffinity()), ni.GetPVCRefCounts())
}

func describeTaints(sl *resourceapi.ResourceSlice) []string {
	var out []string
	for _, d := range sl.Spec.Devices {
		for _, t := range d.Taints {
			out = append(out, d.Name+":"+t.Key+"="+t.Value)
		}
	}
	return out
}

func describeClaim(c *resourceapi.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return "unallocated"
	}
	var devs []string
	for _, r := range c.Status.Allocation.Devices.Results {
		devs = append(devs, fmt.Sprintf("%s/%s/%s share=%s admin=%v", r.Driver, r.Pool, r.Device, ptr.Deref(r.ShareID, ""), ptr.Deref(r.AdminAccess, false)))
	}
	return strings.Join(devs, ";")
}

func describeCapacity(cc map[resourceapi.QualifiedName]*resource.Quantity) string {
	var parts []string
	for name, q := range cc {
		parts = append(parts, fmt.Sprintf("%s=%d", name, q.Value()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
