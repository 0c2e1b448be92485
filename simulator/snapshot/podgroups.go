package snapshot

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
)

// memberState is where a pod of a pod group stands, in the scheduler's
// terms: unscheduled (pending), assumed (placed by this simulation) or
// assigned (bound in the cluster).
type memberState int

const (
	memberUnscheduled memberState = iota
	memberAssumed
	memberAssigned
)

type member struct {
	pod   *v1.Pod
	state memberState
}

func podGroupKeyOf(pod *v1.Pod) (fwk.EntityKey, bool) {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return fwk.EntityKey{}, false
	}
	return fwk.PodGroupKey(pod.Namespace, *pod.Spec.SchedulingGroup.PodGroupName), true
}

func (s *Snapshot) setMember(pod *v1.Pod, state memberState) {
	if key, ok := podGroupKeyOf(pod); ok {
		put(&s.j, inner(&s.j, s.groupMembers, key), pod.UID, member{pod: pod, state: state})
	}
}

func (s *Snapshot) removeMember(pod *v1.Pod) {
	if key, ok := podGroupKeyOf(pod); ok {
		del(&s.j, s.groupMembers[key], pod.UID)
	}
}

// SetPodGroup upserts a PodGroup.
func (s *Snapshot) SetPodGroup(pg *schedulingapi.PodGroup) error {
	if pg == nil {
		return fmt.Errorf("set pod group: nil pod group")
	}
	if err := validName("pod group", pg.Name); err != nil {
		return fmt.Errorf("set pod group: %w", err)
	}
	key := fwk.PodGroupKey(pg.Namespace, pg.Name)
	if old, ok := s.podGroups[key]; ok {
		s.unlinkChild(key, old.Namespace, old.Spec.ParentCompositePodGroupName)
	}
	put(&s.j, s.podGroups, key, pg)
	s.linkChild(key, pg.Namespace, pg.Spec.ParentCompositePodGroupName)
	return nil
}

// RemovePodGroup deletes a PodGroup; its pods stay.
func (s *Snapshot) RemovePodGroup(namespace, name string) error {
	key := fwk.PodGroupKey(namespace, name)
	old, ok := s.podGroups[key]
	if !ok {
		return fmt.Errorf("remove pod group %s: not in the snapshot", key)
	}
	s.unlinkChild(key, namespace, old.Spec.ParentCompositePodGroupName)
	del(&s.j, s.podGroups, key)
	return nil
}

// SetCompositePodGroup upserts a CompositePodGroup.
func (s *Snapshot) SetCompositePodGroup(cpg *schedulingv1alpha3.CompositePodGroup) error {
	if cpg == nil {
		return fmt.Errorf("set composite pod group: nil group")
	}
	if err := validName("composite pod group", cpg.Name); err != nil {
		return fmt.Errorf("set composite pod group: %w", err)
	}
	key := fwk.CompositePodGroupKey(cpg.Namespace, cpg.Name)
	if old, ok := s.composites[key]; ok {
		s.unlinkChild(key, old.Namespace, old.Spec.ParentCompositePodGroupName)
	}
	put(&s.j, s.composites, key, cpg)
	s.linkChild(key, cpg.Namespace, cpg.Spec.ParentCompositePodGroupName)
	return nil
}

// RemoveCompositePodGroup deletes a CompositePodGroup.
func (s *Snapshot) RemoveCompositePodGroup(namespace, name string) error {
	key := fwk.CompositePodGroupKey(namespace, name)
	old, ok := s.composites[key]
	if !ok {
		return fmt.Errorf("remove composite pod group %s: not in the snapshot", key)
	}
	s.unlinkChild(key, namespace, old.Spec.ParentCompositePodGroupName)
	del(&s.j, s.composites, key)
	return nil
}

func (s *Snapshot) linkChild(child fwk.EntityKey, namespace string, parent *string) {
	if parent != nil {
		put(&s.j, innerSet(&s.j, s.groupChildren, fwk.CompositePodGroupKey(namespace, *parent)), child, sets.Empty{})
	}
}

func (s *Snapshot) unlinkChild(child fwk.EntityKey, namespace string, parent *string) {
	if parent != nil {
		del(&s.j, s.groupChildren[fwk.CompositePodGroupKey(namespace, *parent)], child)
	}
}

// SetWorkload upserts a Workload. The scheduler does not read Workloads;
// the autoscaler's gang planning does.
func (s *Snapshot) SetWorkload(w *schedulingapi.Workload) error {
	if w == nil {
		return fmt.Errorf("set workload: nil workload")
	}
	if err := validName("workload", w.Name); err != nil {
		return fmt.Errorf("set workload: %w", err)
	}
	put(&s.j, s.workloads, nsKey(w.Namespace, w.Name), w)
	return nil
}

// RemoveWorkload deletes a Workload.
func (s *Snapshot) RemoveWorkload(namespace, name string) error {
	key := nsKey(namespace, name)
	if _, ok := s.workloads[key]; !ok {
		return fmt.Errorf("remove workload %s: not in the snapshot", key)
	}
	del(&s.j, s.workloads, key)
	return nil
}

// Workload returns a Workload.
func (s *Snapshot) Workload(namespace, name string) (*schedulingapi.Workload, bool) {
	return byName(s.workloads, namespace, name)
}

// PodGroupStates returns the pod group state lister.
func (s *Snapshot) PodGroupStates() fwk.PodGroupStateLister { return &podGroupStateLister{s} }

// PodGroups returns the pod group lister.
func (s *Snapshot) PodGroups() fwk.PodGroupLister { return &podGroupLister{s} }

// CompositePodGroupStates returns the composite pod group state lister.
func (s *Snapshot) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return &compositeStateLister{s}
}

// CompositePodGroups returns the composite pod group lister.
func (s *Snapshot) CompositePodGroups() fwk.CompositePodGroupLister { return &compositeLister{s} }

// BuildHierarchySnapshotFromPod returns the snapshot itself: it already is
// a consistent, immutable-during-a-cycle view, as the scheduler's own
// Snapshot answers.
func (s *Snapshot) BuildHierarchySnapshotFromPod(*v1.Pod) (fwk.PodGroupManager, error) {
	return s, nil
}

// GetRootKeyForGroup walks up the composite hierarchy from a group, as the
// scheduler's snapshot does; found is false when an object is missing.
func (s *Snapshot) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	visited := sets.New[fwk.EntityKey]()
	for cur := key; ; {
		if visited.Has(cur) {
			return fwk.EntityKey{}, false, fmt.Errorf("cycle detected in the pod group hierarchy at %s", cur)
		}
		visited.Insert(cur)
		var parent *string
		switch cur.Type {
		case fwk.PodGroupKeyType:
			pg := s.podGroups[cur]
			if pg == nil {
				return fwk.EntityKey{}, false, nil
			}
			if !s.gates.compositePodGroup {
				return cur, true, nil
			}
			parent = pg.Spec.ParentCompositePodGroupName
		case fwk.CompositePodGroupKeyType:
			cpg := s.composites[cur]
			if cpg == nil {
				return fwk.EntityKey{}, false, nil
			}
			parent = cpg.Spec.ParentCompositePodGroupName
		default:
			return fwk.EntityKey{}, false, fmt.Errorf("root of %s: not a pod group key", cur)
		}
		if parent == nil {
			return cur, true, nil
		}
		cur = fwk.CompositePodGroupKey(cur.Namespace, *parent)
	}
}

type podGroupLister struct{ s *Snapshot }

// Get returns a PodGroup object; like the scheduler's snapshot it refuses
// when the GenericWorkload gate is off.
func (l *podGroupLister) Get(namespace, name string) (*schedulingapi.PodGroup, error) {
	if !l.s.gates.genericWorkload {
		return nil, fmt.Errorf("generic workload feature gate is disabled")
	}
	if pg, ok := l.s.podGroups[fwk.PodGroupKey(namespace, name)]; ok {
		return pg, nil
	}
	return nil, fmt.Errorf("pod group object not found for pod group %s/%s", namespace, name)
}

type podGroupStateLister struct{ s *Snapshot }

// Get returns the state of a pod group that has an object or member pods.
// The view is computed now, O(members), and does not change afterwards.
func (l *podGroupStateLister) Get(namespace, name string) (fwk.PodGroupState, error) {
	key := fwk.PodGroupKey(namespace, name)
	members := l.s.groupMembers[key]
	if len(members) == 0 && l.s.podGroups[key] == nil {
		return nil, fmt.Errorf("pod group state not found for pod group %s/%s", namespace, name)
	}
	v := &podGroupStateView{
		all:         sets.New[types.UID](),
		unscheduled: map[string]*v1.Pod{},
		assumed:     sets.New[types.UID](),
		assigned:    sets.New[types.UID](),
	}
	for uid, m := range members {
		v.all.Insert(uid)
		switch m.state {
		case memberUnscheduled:
			v.unscheduled[m.pod.Name] = m.pod
		case memberAssumed:
			v.assumed.Insert(uid)
			v.scheduled = append(v.scheduled, m.pod)
		case memberAssigned:
			v.assigned.Insert(uid)
			v.scheduled = append(v.scheduled, m.pod)
		}
	}
	sort.Slice(v.scheduled, func(i, k int) bool { return v.scheduled[i].Name < v.scheduled[k].Name })
	return v, nil
}

type podGroupStateView struct {
	all         sets.Set[types.UID]
	unscheduled map[string]*v1.Pod
	assumed     sets.Set[types.UID]
	assigned    sets.Set[types.UID]
	scheduled   []*v1.Pod
}

func (v *podGroupStateView) AllPods() sets.Set[types.UID]        { return v.all }
func (v *podGroupStateView) AllPodsCount() int                   { return len(v.all) }
func (v *podGroupStateView) UnscheduledPods() map[string]*v1.Pod { return v.unscheduled }
func (v *podGroupStateView) AssumedPods() sets.Set[types.UID]    { return v.assumed }
func (v *podGroupStateView) AssignedPods() sets.Set[types.UID]   { return v.assigned }
func (v *podGroupStateView) ScheduledPods() []*v1.Pod            { return v.scheduled }
func (v *podGroupStateView) ScheduledPodsCount() int             { return len(v.scheduled) }

type compositeLister struct{ s *Snapshot }

// Get returns a CompositePodGroup; refused when the CompositePodGroup gate
// is off, as in the scheduler.
func (l *compositeLister) Get(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	if !l.s.gates.compositePodGroup {
		return nil, fmt.Errorf("composite pod group feature gate is disabled")
	}
	if cpg, ok := l.s.composites[fwk.CompositePodGroupKey(namespace, name)]; ok {
		return cpg, nil
	}
	return nil, fmt.Errorf("composite pod group object not found for %s/%s", namespace, name)
}

type compositeStateLister struct{ s *Snapshot }

// Get returns the children of a composite pod group that has an object or
// children, sorted by key.
func (l *compositeStateLister) Get(namespace, name string) (fwk.CompositePodGroupState, error) {
	key := fwk.CompositePodGroupKey(namespace, name)
	children := l.s.groupChildren[key]
	if len(children) == 0 && l.s.composites[key] == nil {
		return nil, fmt.Errorf("composite pod group state not found for %s/%s", namespace, name)
	}
	list := children.UnsortedList()
	sort.Slice(list, func(i, k int) bool { return list[i].String() < list[k].String() })
	return &compositeStateView{children: list}, nil
}

type compositeStateView struct{ children []fwk.EntityKey }

func (v *compositeStateView) GetChildren() []fwk.EntityKey { return v.children }
