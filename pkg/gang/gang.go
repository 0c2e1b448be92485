// Package gang finds the gangs among the pending pods: pods that name a
// PodGroup (spec.schedulingGroup.podGroupName, scheduling.k8s.io) whose
// policy is gang with minCount. The scheduler binds such pods all together
// or not at all, so the autoscaler must plan capacity for a gang as one
// unit, never pod by pod.
package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/objorder"
)

// Gang is a gang PodGroup with its members.
type Gang struct {
	Namespace, Name string
	// MinCount members must run at once for any to run.
	MinCount int
	// Bound are the members already on nodes, or held on a node they
	// are nominated for.
	Bound int
	// Pending are the members the scheduler could not place.
	Pending []*corev1.Pod
	// TopologyKey, when set, is the node label whose value all members'
	// nodes must share (a rack, an NVLink domain).
	TopologyKey string
	Priority    int32
	// Composite: Name is a root CompositePodGroup (scheduling.k8s.io/
	// v1alpha3) and the gang is its whole tree: Pending are the pending
	// members of every PodGroup under it, MinCount and Bound their sums,
	// TopologyKey the root's. The scheduler places the tree in one cycle.
	Composite bool
	// Group, when set, is a PodGroup the planner simulates for a gang
	// that has none of its own (a ProvisioningRequest's pods: all of them
	// or none, gang policy with minCount = all): Pending name it, and the
	// scheduler's pod group cycle can plan the gang.
	Group *schedulingv1beta1.PodGroup
}

// Key is namespace/name for a PodGroup's gang and
// namespace/CompositePodGroup/name for a tree's: a PodGroup and a
// CompositePodGroup may share a name, and the tracker tells gangs'
// scale-ups apart by it.
func (g *Gang) Key() string {
	if g.Composite {
		return g.Namespace + "/CompositePodGroup/" + g.Name
	}
	return g.Namespace + "/" + g.Name
}

// Need is how many pending members must get a node for the gang to run.
func (g *Gang) Need() int { return max(g.MinCount-g.Bound, 0) }

// Waiting is a gang, or a pod of one, that cannot be planned yet.
type Waiting struct {
	Namespace, Name string // the PodGroup
	Pods            []*corev1.Pod
	Reason          string
}

// Split sorts the pending pods into gangs, pods planned alone, and pods of
// gangs that must be waited for: a PodGroup that does not exist (yet), or
// a gang with fewer members created than minCount — the scheduler does not
// try it either. all are every pod of the cluster, to count bound members.
// composites are the CompositePodGroups when the CompositePodGroup gate is
// on (nil otherwise: parents are then ignored, as the scheduler ignores
// them): the pods of every PodGroup under one root form one gang.
func Split(pending, all []*corev1.Pod, groups []*schedulingv1beta1.PodGroup, composites []*schedulingv1alpha3.CompositePodGroup) ([]*Gang, []*corev1.Pod, []Waiting) {
	byKey := map[string]*schedulingv1beta1.PodGroup{}
	for _, g := range groups {
		byKey[g.Namespace+"/"+g.Name] = g
	}
	var trees *forest
	if composites != nil {
		trees = newForest(composites)
	}
	members := map[string]int{}
	bound := map[string]int{}
	isPending := make(map[types.UID]bool, len(pending))
	for _, p := range pending {
		isPending[p.UID] = true
	}
	for _, p := range all {
		key, ok := groupKey(p)
		if !ok || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		members[key]++
		// A member nominated for a node and not pending is held there
		// (the snapshot places it): it counts as placed, or the rest of
		// its gang would look short of members.
		if p.Spec.NodeName != "" || (p.Status.NominatedNodeName != "" && !isPending[p.UID]) {
			bound[key]++
		}
	}
	gangs := map[string]*Gang{}
	waiting := map[string]*Waiting{}
	var loose []*corev1.Pod
	for _, p := range pending {
		key, ok := groupKey(p)
		if !ok {
			loose = append(loose, p)
			continue
		}
		pg := byKey[key]
		if pg == nil {
			wait(waiting, p, key, fmt.Sprintf("PodGroup %s does not exist", key))
			continue
		}
		if trees != nil && pg.Spec.ParentCompositePodGroupName != nil {
			trees.add(p, pg)
			continue
		}
		gp := pg.Spec.SchedulingPolicy.Gang
		if gp == nil {
			loose = append(loose, p) // a basic group schedules pod by pod
			continue
		}
		if members[key] < int(gp.MinCount) {
			wait(waiting, p, key, fmt.Sprintf("gang %s has %d of its minCount %d pods; waiting for the rest to be created", key, members[key], gp.MinCount))
			continue
		}
		g := gangs[key]
		if g == nil {
			g = &Gang{Namespace: pg.Namespace, Name: pg.Name, MinCount: int(gp.MinCount), Bound: bound[key]}
			if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
				g.TopologyKey = c.Topology[0].Key
			}
			if pg.Spec.Priority != nil {
				g.Priority = *pg.Spec.Priority
			} else if p.Spec.Priority != nil {
				g.Priority = *p.Spec.Priority
			}
			gangs[key] = g
		}
		g.Pending = append(g.Pending, p)
	}
	out := make([]*Gang, 0, len(gangs))
	for _, g := range gangs {
		out = append(out, g)
	}
	if trees != nil {
		tg, tw := trees.gangs(members, bound)
		out = append(out, tg...)
		for _, w := range tw {
			waiting[w.Namespace+"/"+w.Name] = &w
		}
	}
	// Higher priority first, then by name: deterministic plans.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].Key() < out[j].Key()
	})
	var w []Waiting
	for _, x := range waiting {
		w = append(w, *x)
	}
	sort.Slice(w, func(i, j int) bool { return objorder.Compare(w[i].Namespace, w[i].Name, w[j].Namespace, w[j].Name) < 0 })
	return out, loose, w
}

func wait(waiting map[string]*Waiting, p *corev1.Pod, key, reason string) {
	w := waiting[key]
	if w == nil {
		w = &Waiting{Namespace: p.Namespace, Name: *p.Spec.SchedulingGroup.PodGroupName, Reason: reason}
		waiting[key] = w
	}
	w.Pods = append(w.Pods, p)
}

func groupKey(p *corev1.Pod) (string, bool) {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil || *p.Spec.SchedulingGroup.PodGroupName == "" {
		return "", false
	}
	return p.Namespace + "/" + *p.Spec.SchedulingGroup.PodGroupName, true
}
