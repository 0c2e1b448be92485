package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// GroupTree is what one pod group cycle places: a leaf PodGroup with its
// unscheduled members, or a CompositePodGroup (scheduling.k8s.io/v1alpha3,
// the CompositePodGroup gate) with its child groups, as the scheduler's
// queue hands a root to the cycle (workload_forest.go).
type GroupTree struct {
	PodGroup  *schedulingv1beta1.PodGroup
	Composite *schedulingv1alpha3.CompositePodGroup
	// Members are a leaf's unscheduled members, in the order tried.
	Members []*v1.Pod
	// Children are a composite's groups; the cycle tries them oldest
	// first, then by name (PodGroupInfo.GetChildGroups).
	Children []*GroupTree
}

func (t *GroupTree) String() string {
	if t.Composite != nil {
		return "CompositePodGroup " + t.Composite.Namespace + "/" + t.Composite.Name
	}
	if t.PodGroup != nil {
		return "PodGroup " + t.PodGroup.Namespace + "/" + t.PodGroup.Name
	}
	return "empty pod group tree"
}

// Pods are every leaf's members, depth first in the children's order:
// the order of a root PlacementOutcome's Members.
func (t *GroupTree) Pods() []*v1.Pod {
	if t.Composite == nil {
		return t.Members
	}
	var out []*v1.Pod
	for _, c := range t.ordered().Children {
		out = append(out, c.Pods()...)
	}
	return out
}

// Leaves are the tree's PodGroups, in the order of Pods.
func (t *GroupTree) Leaves() []*GroupTree {
	if t.Composite == nil {
		return []*GroupTree{t}
	}
	var out []*GroupTree
	for _, c := range t.ordered().Children {
		out = append(out, c.Leaves()...)
	}
	return out
}

func (t *GroupTree) validate() error {
	switch {
	case t == nil || (t.PodGroup == nil) == (t.Composite == nil):
		return fmt.Errorf("a pod group tree node needs exactly one of a PodGroup and a CompositePodGroup")
	case t.Composite != nil:
		if len(t.Members) > 0 {
			return fmt.Errorf("%s: a composite has no members of its own", t)
		}
		for _, c := range t.Children {
			if err := c.validate(); err != nil {
				return err
			}
		}
		return nil
	}
	pg := t.PodGroup
	if len(t.Children) > 0 {
		return fmt.Errorf("%s: a PodGroup has no child groups", t)
	}
	for _, m := range t.Members {
		if m == nil || m.Namespace != pg.Namespace || m.Spec.SchedulingGroup == nil ||
			m.Spec.SchedulingGroup.PodGroupName == nil || *m.Spec.SchedulingGroup.PodGroupName != pg.Name {
			return fmt.Errorf("%s: a member is not one of its pods", t)
		}
	}
	return nil
}

// ordered is t with every composite's children in the cycle's order:
// creation time, then name, as PodGroupInfo.GetChildGroups sorts them.
func (t *GroupTree) ordered() *GroupTree {
	if t.Composite == nil {
		return t
	}
	out := *t
	out.Children = make([]*GroupTree, len(t.Children))
	for i, c := range t.Children {
		out.Children[i] = c.ordered()
	}
	slices.SortStableFunc(out.Children, func(a, b *GroupTree) int {
		ta, tb := a.meta(), b.meta()
		if c := ta.CreationTimestamp.Compare(tb.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(ta.Name, tb.Name)
	})
	return &out
}

func (t *GroupTree) meta() *schedulingv1beta1.PodGroup {
	if t.PodGroup != nil {
		return t.PodGroup
	}
	// Only the name and creation time are compared.
	return &schedulingv1beta1.PodGroup{ObjectMeta: t.Composite.ObjectMeta}
}

// info is the framework.PodGroupInfo the scheduler's queue builds for the
// tree (buildPodGroupInfoForPG, buildPodGroupInfoForCPG).
func (t *GroupTree) info() *schedframework.PodGroupInfo {
	if t.Composite == nil {
		return &schedframework.PodGroupInfo{Namespace: t.PodGroup.Namespace, Name: t.PodGroup.Name, Type: fwk.PodGroupKeyType,
			UnscheduledPods: t.Members, PodGroup: t.PodGroup}
	}
	pgi := &schedframework.PodGroupInfo{Namespace: t.Composite.Namespace, Name: t.Composite.Name, Type: fwk.CompositePodGroupKeyType,
		CompositePodGroup: t.Composite, Children: make([]*schedframework.PodGroupInfo, 0, len(t.Children))}
	for _, c := range t.Children {
		pgi.Children = append(pgi.Children, c.info())
	}
	return pgi
}

// tryChildren runs each child group's cycle inside the composite's
// placement, keeping each child's winner for its later siblings, with
// PlacementFeasible counting the children placed after each
// (compositePodGroupSchedulingDefaultAlgorithm).
func (r *Runner) tryChildren(ctx context.Context, placementState *schedframework.CycleState, t *GroupTree, pgi *schedframework.PodGroupInfo,
	out *PlacementOutcome, alike *Alike) (*fwk.Status, error) {
	out.Children = make([]*PodGroupResult, len(t.Children))
	progress := schedframework.PlacementProgress{Remaining: len(t.Children)}
	st := r.fw.RunPlacementFeasiblePlugins(ctx, placementState, pgi, progress)
	for i, child := range t.Children {
		if st.IsError() || st.Code() == fwk.Unschedulable {
			break
		}
		res, err := r.scheduleTree(ctx, child, placementState, out.Nodes, true, alike)
		if err != nil {
			return nil, fmt.Errorf("child %s: %w", child, err)
		}
		out.Children[i] = res
		progress.Remaining--
		if res.Best() != nil {
			progress.Scheduled++
		}
		st = r.fw.RunPlacementFeasiblePlugins(ctx, placementState, pgi, progress)
	}
	for i, child := range t.Children {
		var members []*ScheduleResult
		if best := out.Children[i].Best(); best != nil {
			members = best.Members
		}
		n := len(child.Pods())
		out.Members = append(out.Members, members...)
		for range n - len(members) {
			out.Members = append(out.Members, nil)
		}
	}
	return st, nil
}

// GroupTree builds the tree the cycle places for a gang from the snapshot:
// the PodGroup namespace/name, or with composite the CompositePodGroup and
// every group under it, each leaf's members the pending pods naming it, in
// their order.
func (r *Runner) GroupTree(namespace, name string, composite bool, pending []*v1.Pod) (*GroupTree, error) {
	byGroup := map[string][]*v1.Pod{}
	for _, p := range pending {
		if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
			byGroup[*sg.PodGroupName] = append(byGroup[*sg.PodGroupName], p)
		}
	}
	key := fwk.PodGroupKey(namespace, name)
	if composite {
		key = fwk.CompositePodGroupKey(namespace, name)
	}
	return r.groupTree(key, byGroup, map[fwk.EntityKey]bool{})
}

func (r *Runner) groupTree(key fwk.EntityKey, byGroup map[string][]*v1.Pod, seen map[fwk.EntityKey]bool) (*GroupTree, error) {
	if seen[key] {
		return nil, fmt.Errorf("%s: the group hierarchy loops", key)
	}
	seen[key] = true
	if key.Type == fwk.PodGroupKeyType {
		pg, err := r.snap.PodGroups().Get(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		return &GroupTree{PodGroup: pg, Members: byGroup[key.Name]}, nil
	}
	cpg, err := r.snap.CompositePodGroups().Get(key.Namespace, key.Name)
	if err != nil {
		return nil, err
	}
	state, err := r.snap.CompositePodGroupStates().Get(key.Namespace, key.Name)
	if err != nil {
		return nil, err
	}
	t := &GroupTree{Composite: cpg}
	for _, child := range state.GetChildren() {
		c, err := r.groupTree(child, byGroup, seen)
		if err != nil {
			return nil, err
		}
		t.Children = append(t.Children, c)
	}
	return t.ordered(), nil
}

// RootTopologyKey is the topology key of the tree's root group, "" when
// it has none (the scheduler reads the first constraint).
func (t *GroupTree) RootTopologyKey() string {
	if t.Composite != nil {
		if c := t.Composite.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return c.Topology[0].Key
		}
	} else if c := t.PodGroup.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		return c.Topology[0].Key
	}
	return ""
}

// TopologyKeys are the topology keys of every level of the tree, root
// first (one per group: the scheduler reads the first constraint).
func (t *GroupTree) TopologyKeys() []string {
	var out []string
	if key := t.RootTopologyKey(); key != "" {
		out = append(out, key)
	}
	for _, c := range t.Children {
		for _, k := range c.TopologyKeys() {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out
}
