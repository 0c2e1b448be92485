package snapshot

import (
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Compile-time proof that Snapshot keeps the contracts the scheduler pins
// for autoscalers.
var (
	_ ClusterSnapshot                  = &Snapshot{}
	_ fwk.SharedLister                 = &Snapshot{}
	_ fwk.SharedDRAManager             = &Snapshot{}
	_ fwk.PodGroupManager              = &Snapshot{}
	_ fwk.MutableSnapshotSharedLister  = &mutableLister{}
	_ fwk.NodeInfoLister               = &Snapshot{}
	_ fwk.StorageInfoLister            = &Snapshot{}
	_ fwk.ResourceClaimTracker         = claimTracker{}
	_ fwk.ResourceSliceLister          = sliceLister{}
	_ fwk.DeviceClassLister            = classLister{}
	_ fwk.DeviceClassResolver          = classLister{}
	_ fwk.PodGroupStateLister          = &podGroupStateLister{}
	_ fwk.PodGroupLister               = &podGroupLister{}
	_ fwk.CompositePodGroupStateLister = &compositeStateLister{}
	_ fwk.CompositePodGroupLister      = &compositeLister{}
	_ fwk.PodGroupState                = &podGroupStateView{}
	_ fwk.CompositePodGroupState       = &compositeStateView{}
)

// gates are the feature gates the snapshot honours, read once in New the
// way the scheduler's own caches read them at construction.
type gates struct {
	consumableCapacity bool // shared devices tracked per share, with capacity
	deviceTaintRules   bool // DeviceTaintRules patched into listed slices
	extendedResource   bool // DeviceClassResolver answers
	genericWorkload    bool // PodGroup objects visible to the framework
	compositePodGroup  bool // CompositePodGroup hierarchy honoured
}

// Snapshot is the ClusterSnapshot implementation: plain maps changed in
// place, with a journal of undo steps per fork level (see journal.go).
// Reads are direct map lookups at any fork depth.
type Snapshot struct {
	j      journal
	gates  gates
	logger klog.Logger

	// Nodes and pods.
	nodes         map[string]*framework.NodeInfo
	all           *orderedList[fwk.NodeInfo] // every node, in insertion order
	affinity      *orderedList[fwk.NodeInfo] // nodes with pods having inter-pod (anti-)affinity
	antiAffinity  *orderedList[fwk.NodeInfo] // nodes with pods having required anti-affinity
	nonHostAnti   *orderedList[fwk.NodeInfo] // ... with a topology key other than hostname
	placed        map[string]placedPod       // "ns/name" -> where the pod is
	pending       map[string]*v1.Pod         // "ns/name" -> unplaced pod
	pvcUsers      map[string]int             // "ns/claim" -> pods using the PVC
	slicesOfNode  map[string]sets.Set[string]
	slices        map[string]*resourceapi.ResourceSlice
	patchedSlices *orderedList[*resourceapi.ResourceSlice] // with DeviceTaintRules applied
	taintRules    map[string]*resourceapi.DeviceTaintRule
	classes       map[string]*resourceapi.DeviceClass
	extClasses    map[v1.ResourceName]sets.Set[string] // extendedResourceName -> classes
	claims        map[string]*resourceapi.ResourceClaim
	claimList     *orderedList[*resourceapi.ResourceClaim]
	claimsByOwner map[types.UID]sets.Set[string] // controller UID -> claim keys
	// ownerSets, when not nil, are the sets of claimsByOwner this
	// snapshot may write: the others are shared with the claim base
	// (LoadResourceClaims), copied on the first write (ownerSet).
	ownerSets     map[types.UID]bool
	templates     map[string]*resourceapi.ResourceClaimTemplate
	inFlight      map[types.UID]inFlightAllocation
	assumedClaims map[string]*resourceapi.ResourceClaim // claim before AssumeClaimAfterAPICall
	alloc         allocatedIndex
	podGroups     map[fwk.EntityKey]*schedulingapi.PodGroup
	composites    map[fwk.EntityKey]*schedulingv1alpha3.CompositePodGroup
	workloads     map[string]*schedulingapi.Workload
	groupMembers  map[fwk.EntityKey]map[types.UID]member
	groupChildren map[fwk.EntityKey]sets.Set[fwk.EntityKey] // composite -> children

	// slicesOfNode (above) keys the slices not bound to a node by "".
	// sliceScope is not content but a view (ScopeSlices): nil, or the
	// nodes whose slices are listed.
	sliceScope []string

	// prints: see DeviceState; "" for allocations pinned to no node.
	prints map[string]AllocPrint

	// gens and genSeq: see Gen. gens[""] is the shared part. genSeq and
	// epoch (see Epoch) outlive Reset.
	gens   map[string]uint64
	genSeq uint64
	// genLog, when set, lists the nodes touched (LogGens).
	genLog *GenLog
	epoch  uint64

	// facts memoises what LocalDevices reads of slices (not content); it
	// outlives Reset.
	facts *sliceFacts
	// warm holds the claim base (LoadResourceClaims); it outlives Reset.
	warm *ClaimWarmer
	// reads is which device attributes node keys digest; it outlives
	// Reset.
	reads *deviceReads
}

type placedPod struct {
	node string
	pod  *v1.Pod
}

// New returns an empty snapshot. Feature gates must be set before: like
// the scheduler's caches, the snapshot copies them here.
func New(logger klog.Logger) *Snapshot {
	gate := utilfeature.DefaultFeatureGate
	reads := &deviceReads{}
	return &Snapshot{
		gates: gates{
			consumableCapacity: gate.Enabled(features.DRAConsumableCapacity),
			deviceTaintRules:   gate.Enabled(features.DRADeviceTaintRules),
			extendedResource:   gate.Enabled(features.DRAExtendedResource),
			genericWorkload:    gate.Enabled(features.GenericWorkload),
			compositePodGroup:  gate.Enabled(features.CompositePodGroup),
		},
		logger:        logger,
		facts:         &sliceFacts{arrived: &SliceWarmer{reads: reads}},
		warm:          &ClaimWarmer{},
		reads:         reads,
		nodes:         map[string]*framework.NodeInfo{},
		all:           newOrderedList[fwk.NodeInfo](),
		affinity:      newOrderedList[fwk.NodeInfo](),
		antiAffinity:  newOrderedList[fwk.NodeInfo](),
		nonHostAnti:   newOrderedList[fwk.NodeInfo](),
		placed:        map[string]placedPod{},
		pending:       map[string]*v1.Pod{},
		pvcUsers:      map[string]int{},
		slicesOfNode:  map[string]sets.Set[string]{},
		gens:          map[string]uint64{},
		prints:        map[string]AllocPrint{},
		slices:        map[string]*resourceapi.ResourceSlice{},
		patchedSlices: newOrderedList[*resourceapi.ResourceSlice](),
		taintRules:    map[string]*resourceapi.DeviceTaintRule{},
		classes:       map[string]*resourceapi.DeviceClass{},
		extClasses:    map[v1.ResourceName]sets.Set[string]{},
		claims:        map[string]*resourceapi.ResourceClaim{},
		claimList:     newOrderedList[*resourceapi.ResourceClaim](),
		claimsByOwner: map[types.UID]sets.Set[string]{},
		templates:     map[string]*resourceapi.ResourceClaimTemplate{},
		inFlight:      map[types.UID]inFlightAllocation{},
		assumedClaims: map[string]*resourceapi.ResourceClaim{},
		alloc:         newAllocatedIndex(),
		podGroups:     map[fwk.EntityKey]*schedulingapi.PodGroup{},
		composites:    map[fwk.EntityKey]*schedulingv1alpha3.CompositePodGroup{},
		workloads:     map[string]*schedulingapi.Workload{},
		groupMembers:  map[fwk.EntityKey]map[types.UID]member{},
		groupChildren: map[fwk.EntityKey]sets.Set[fwk.EntityKey]{},
	}
}

// Fork opens a nested level of speculative changes.
func (s *Snapshot) Fork() {
	s.j.fork()
}

// Revert drops every change made since the matching Fork.
func (s *Snapshot) Revert() error {
	steps, err := s.j.revert()
	if err != nil {
		return err
	}
	s.logger.V(6).Info("Snapshot reverted", "undoSteps", steps, "depth", s.j.depth())
	return nil
}

// Commit keeps the changes of the innermost level.
func (s *Snapshot) Commit() error {
	steps, err := s.j.commit()
	if err != nil {
		return err
	}
	s.logger.V(6).Info("Snapshot committed", "undoSteps", steps, "depth", s.j.depth())
	return nil
}

// Reset empties the snapshot in place, so that a framework holding it sees
// the new content. Feature gates are read again. The generation counter
// goes on (see Gen): caches outliving the pass key by Gens.
func (s *Snapshot) Reset() error {
	if s.j.depth() != 0 {
		return fmt.Errorf("reset snapshot: %d forks still open", s.j.depth())
	}
	facts, warm, reads, seq, epoch := s.facts, s.warm, s.reads, s.genSeq, s.epoch
	*s = *New(s.logger)
	s.facts, s.warm, s.reads = facts, warm, reads
	s.facts.reset()
	s.reads.reset()
	s.genSeq, s.epoch = seq, epoch+1
	s.touch("")
	return nil
}

// Reserve makes room in an empty snapshot for about this many objects,
// so that a build of tens of thousands of pods does not grow its maps
// from empty, rehashing each entry several times. (Claims come indexed
// already: LoadResourceClaims.) A snapshot that holds anything is left
// alone.
func (s *Snapshot) Reserve(nodes, pods, slices int) {
	if len(s.nodes)+len(s.placed)+len(s.pending)+len(s.slices)+len(s.claims) > 0 {
		return
	}
	s.nodes = make(map[string]*framework.NodeInfo, nodes)
	s.all = newOrderedListSized[fwk.NodeInfo](nodes)
	s.placed = make(map[string]placedPod, pods)
	s.slicesOfNode = make(map[string]sets.Set[string], nodes)
	s.slices = make(map[string]*resourceapi.ResourceSlice, slices)
	s.patchedSlices = newOrderedListSized[*resourceapi.ResourceSlice](slices)
	gens := make(map[string]uint64, nodes+1)
	maps.Copy(gens, s.gens) // the shared part's, set by Reset
	s.gens = gens
}

// Depth is the number of open fork levels.
func (s *Snapshot) Depth() int {
	return s.j.depth()
}

// nsKey is the "namespace/name" key of namespaced objects.
func nsKey(namespace, name string) string {
	return namespace + "/" + name
}

// byName is m[nsKey(namespace, name)] without making the key on the
// heap: claims and pods are looked up by name several times for every pod
// a pass places or moves.
func byName[V any](m map[string]V, namespace, name string) (V, bool) {
	var buf [128]byte
	key := append(append(append(buf[:0], namespace...), '/'), name...)
	v, ok := m[string(key)]
	return v, ok
}

func validName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s without a name", kind)
	}
	return nil
}
