package snapshot

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// reference is the naive implementation the property test checks Snapshot
// against: plain maps, Fork pushes a full copy, Revert pops it, and every
// derived answer (allocated devices, group states, patched slices) is
// recomputed from scratch when asked. Slow and obviously right.
type reference struct {
	st    refState
	stack []refState
}

type refState struct {
	nodes    map[string]*v1.Node
	placed   map[string]placedPod
	pending  map[string]*v1.Pod
	slices   map[string]*resourceapi.ResourceSlice
	rules    map[string]*resourceapi.DeviceTaintRule
	claims   map[string]*resourceapi.ResourceClaim
	inFlight map[types.UID]inFlightAllocation
	groups   map[string]*schedulingapi.PodGroup
}

func newReference() *reference {
	return &reference{st: refState{
		nodes: map[string]*v1.Node{}, placed: map[string]placedPod{}, pending: map[string]*v1.Pod{},
		slices: map[string]*resourceapi.ResourceSlice{}, rules: map[string]*resourceapi.DeviceTaintRule{},
		claims: map[string]*resourceapi.ResourceClaim{}, inFlight: map[types.UID]inFlightAllocation{},
		groups: map[string]*schedulingapi.PodGroup{},
	}}
}

// Objects are never modified once stored, so copying the maps is a deep
// enough copy of the state.
func (s refState) clone() refState {
	return refState{maps.Clone(s.nodes), maps.Clone(s.placed), maps.Clone(s.pending), maps.Clone(s.slices),
		maps.Clone(s.rules), maps.Clone(s.claims), maps.Clone(s.inFlight), maps.Clone(s.groups)}
}

func (r *reference) Fork() { r.stack = append(r.stack, r.st.clone()) }

func (r *reference) Revert() error {
	if len(r.stack) == 0 {
		return errNoFork
	}
	r.st, r.stack = r.stack[len(r.stack)-1], r.stack[:len(r.stack)-1]
	return nil
}

func (r *reference) Commit() error {
	if len(r.stack) == 0 {
		return errNoFork
	}
	r.stack = r.stack[:len(r.stack)-1]
	return nil
}

func (r *reference) AddNode(n *v1.Node) error {
	if _, ok := r.st.nodes[n.Name]; ok {
		return fmt.Errorf("exists")
	}
	r.st.nodes[n.Name] = n
	return nil
}

func (r *reference) RemoveNode(name string) error {
	if _, ok := r.st.nodes[name]; !ok {
		return fmt.Errorf("absent")
	}
	delete(r.st.nodes, name)
	for k, p := range r.st.placed {
		if p.node == name {
			delete(r.st.placed, k)
		}
	}
	for k, sl := range r.st.slices {
		if ptr.Deref(sl.Spec.NodeName, "") == name {
			delete(r.st.slices, k)
		}
	}
	return nil
}

func (r *reference) AddPod(pod *v1.Pod, node string) error {
	key := nsKey(pod.Namespace, pod.Name)
	if _, ok := r.st.placed[key]; ok {
		return fmt.Errorf("placed")
	}
	if _, ok := r.st.nodes[node]; !ok {
		return fmt.Errorf("no node")
	}
	r.st.placed[key] = placedPod{node: node, pod: pod}
	delete(r.st.pending, key)
	return nil
}

func (r *reference) RemovePod(namespace, name string) error {
	if _, ok := r.st.placed[nsKey(namespace, name)]; !ok {
		return fmt.Errorf("absent")
	}
	delete(r.st.placed, nsKey(namespace, name))
	return nil
}

func (r *reference) AddPendingPod(pod *v1.Pod) error {
	if _, ok := r.st.placed[nsKey(pod.Namespace, pod.Name)]; ok {
		return fmt.Errorf("placed")
	}
	r.st.pending[nsKey(pod.Namespace, pod.Name)] = pod
	return nil
}

func (r *reference) SetResourceSlice(sl *resourceapi.ResourceSlice) error {
	r.st.slices[sl.Name] = sl
	return nil
}

func (r *reference) RemoveResourceSlice(name string) error {
	if _, ok := r.st.slices[name]; !ok {
		return fmt.Errorf("absent")
	}
	delete(r.st.slices, name)
	return nil
}

func (r *reference) SetDeviceTaintRule(rule *resourceapi.DeviceTaintRule) error {
	r.st.rules[rule.Name] = rule
	return nil
}

func (r *reference) RemoveDeviceTaintRule(name string) error {
	if _, ok := r.st.rules[name]; !ok {
		return fmt.Errorf("absent")
	}
	delete(r.st.rules, name)
	return nil
}

func (r *reference) SetResourceClaim(c *resourceapi.ResourceClaim) error {
	r.st.claims[nsKey(c.Namespace, c.Name)] = c
	return nil
}

func (r *reference) RemoveResourceClaim(namespace, name string) error {
	if _, ok := r.st.claims[nsKey(namespace, name)]; !ok {
		return fmt.Errorf("absent")
	}
	delete(r.st.claims, nsKey(namespace, name))
	return nil
}

func (r *reference) SetPodGroup(pg *schedulingapi.PodGroup) error {
	r.st.groups[nsKey(pg.Namespace, pg.Name)] = pg
	return nil
}

func (r *reference) signal(c *resourceapi.ResourceClaim) {
	if f, ok := r.st.inFlight[c.UID]; ok {
		r.st.inFlight[c.UID] = inFlightAllocation{claim: f.claim, sharers: f.sharers + 1}
		return
	}
	if stored, ok := r.st.claims[nsKey(c.Namespace, c.Name)]; ok && stored.UID == c.UID && stored.Status.Allocation != nil {
		return
	}
	r.st.inFlight[c.UID] = inFlightAllocation{claim: c, sharers: 1}
}

func (r *reference) unsignal(uid types.UID, force bool) bool {
	f, ok := r.st.inFlight[uid]
	switch {
	case !ok:
		return false
	case force || f.sharers <= 1:
		delete(r.st.inFlight, uid)
		return true
	default:
		r.st.inFlight[uid] = inFlightAllocation{claim: f.claim, sharers: f.sharers - 1}
		return false
	}
}

// view is what the property test compares: everything a reader of either
// implementation can observe, in a canonical form.
type view struct {
	Nodes       map[string]string // node -> sorted pods and requested resources
	Affinity    []string
	PVCs        []string
	Pending     []string
	Slices      map[string][]string // slice -> device taints
	Claims      map[string]string   // claim -> allocation
	Dedicated   []string
	Shared      []string
	Capacity    map[string]string
	InFlight    []string
	GroupStates map[string]string
	OwnedClaims map[string][]string
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// viewOfReference computes the view from scratch.
func viewOfReference(r *reference) view {
	st := r.st
	v := newView()
	anti := map[string]bool{}
	for name, node := range st.nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		for _, p := range st.placed {
			if p.node != name {
				continue
			}
			cp := *p.pod
			cp.Spec.NodeName = name
			ni.AddPod(&cp)
			if p.pod.Spec.Affinity != nil {
				anti[name] = true
			}
		}
		v.Nodes[name] = describeNode(ni)
	}
	for name := range anti {
		v.Affinity = append(v.Affinity, name)
	}
	pvcs := map[string]bool{}
	for _, p := range st.placed {
		for _, vol := range p.pod.Spec.Volumes {
			pvcs["ns/"+vol.PersistentVolumeClaim.ClaimName] = true
		}
	}
	for k := range pvcs {
		v.PVCs = append(v.PVCs, k)
	}
	for _, p := range st.pending {
		v.Pending = append(v.Pending, p.Name)
	}
	ruleNames := sorted(slices.Collect(maps.Keys(st.rules)))
	for _, sl := range st.slices {
		var taints []string
		for _, d := range sl.Spec.Devices {
			for _, rn := range ruleNames {
				sel := st.rules[rn].Spec.DeviceSelector
				if ptr.Deref(sel.Pool, sl.Spec.Pool.Name) == sl.Spec.Pool.Name && ptr.Deref(sel.Device, d.Name) == d.Name {
					taints = append(taints, d.Name+":"+st.rules[rn].Spec.Taint.Key+"="+st.rules[rn].Spec.Taint.Value)
				}
			}
		}
		v.Slices[sl.Name] = taints
	}
	dedicated, shared, capacity := map[string]bool{}, map[string]bool{}, map[string]map[resourceapi.QualifiedName]int64{}
	count := func(c *resourceapi.ResourceClaim) {
		if c.Status.Allocation == nil {
			return
		}
		for _, res := range c.Status.Allocation.Devices.Results {
			id := res.Driver + "/" + res.Pool + "/" + res.Device
			switch {
			case ptr.Deref(res.AdminAccess, false):
			case res.ShareID != nil:
				shared[id+"/"+string(*res.ShareID)] = true
				if capacity[id] == nil {
					capacity[id] = map[resourceapi.QualifiedName]int64{}
				}
				for name, q := range res.ConsumedCapacity {
					capacity[id][name] += q.Value()
				}
			default:
				dedicated[id] = true
			}
		}
	}
	for _, c := range st.claims {
		v.Claims[c.Name] = describeClaim(c)
		count(c)
		if owner := metav1.GetControllerOf(c); owner != nil {
			for i := range nPods {
				if owner.UID == podUID(i) {
					v.OwnedClaims[podName(i)] = append(v.OwnedClaims[podName(i)], c.Name)
				}
			}
		}
	}
	for _, f := range st.inFlight {
		count(f.claim)
		v.InFlight = append(v.InFlight, f.claim.Name)
	}
	v.Dedicated, v.Shared = slices.Collect(maps.Keys(dedicated)), slices.Collect(maps.Keys(shared))
	for id, cc := range capacity {
		var parts []string
		for name, n := range cc {
			parts = append(parts, fmt.Sprintf("%s=%d", name, n))
		}
		v.Capacity[id] = strings.Join(sorted(parts), ",")
	}
	for g := range nGroups {
		name := fmt.Sprintf("g%d", g)
		var all, assumed, assigned, unscheduled int
		for _, p := range st.placed {
			if inGroup(p.pod, name) {
				all++
				if p.pod.Spec.NodeName == "" {
					assumed++
				} else {
					assigned++
				}
			}
		}
		for _, p := range st.pending {
			if inGroup(p, name) {
				all++
				unscheduled++
			}
		}
		if all > 0 || st.groups["ns/"+name] != nil {
			v.GroupStates[name] = fmt.Sprintf("all=%d assumed=%d assigned=%d unscheduled=%d", all, assumed, assigned, unscheduled)
		}
	}
	return v.canonical()
}

func inGroup(p *v1.Pod, group string) bool {
	return p.Spec.SchedulingGroup != nil && ptr.Deref(p.Spec.SchedulingGroup.PodGroupName, "") == group
}
