package gang

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
)

// forest gathers the pending members of PodGroups under
// CompositePodGroups by their root.
type forest struct {
	composites map[string]*schedulingv1alpha3.CompositePodGroup
	roots      map[string]*tree
	broken     map[string]*Waiting // by the PodGroup whose ancestry is broken
}

type tree struct {
	root    *schedulingv1alpha3.CompositePodGroup
	pending []*corev1.Pod
	leaves  map[string]*schedulingv1beta1.PodGroup
}

func newForest(composites []*schedulingv1alpha3.CompositePodGroup) *forest {
	f := &forest{composites: map[string]*schedulingv1alpha3.CompositePodGroup{}, roots: map[string]*tree{}, broken: map[string]*Waiting{}}
	for _, c := range composites {
		f.composites[c.Namespace+"/"+c.Name] = c
	}
	return f
}

// add files a pending member of pg (which has a parent) under its root,
// or under the waiting when an ancestor is missing or the chain loops:
// the scheduler cannot place the tree either.
func (f *forest) add(p *corev1.Pod, pg *schedulingv1beta1.PodGroup) {
	root, err := f.rootOf(pg)
	if err != nil {
		wait(f.broken, p, pg.Namespace+"/"+pg.Name, err.Error())
		return
	}
	key := root.Namespace + "/" + root.Name
	t := f.roots[key]
	if t == nil {
		t = &tree{root: root, leaves: map[string]*schedulingv1beta1.PodGroup{}}
		f.roots[key] = t
	}
	t.pending = append(t.pending, p)
	t.leaves[pg.Namespace+"/"+pg.Name] = pg
}

func (f *forest) rootOf(pg *schedulingv1beta1.PodGroup) (*schedulingv1alpha3.CompositePodGroup, error) {
	parent := pg.Spec.ParentCompositePodGroupName
	seen := map[string]bool{}
	var cur *schedulingv1alpha3.CompositePodGroup
	for parent != nil {
		key := pg.Namespace + "/" + *parent
		if seen[key] {
			return nil, fmt.Errorf("the CompositePodGroups above PodGroup %s/%s form a loop at %s", pg.Namespace, pg.Name, key)
		}
		seen[key] = true
		cur = f.composites[key]
		if cur == nil {
			return nil, fmt.Errorf("CompositePodGroup %s (above PodGroup %s/%s) does not exist", key, pg.Namespace, pg.Name)
		}
		parent = cur.Spec.ParentCompositePodGroupName
	}
	return cur, nil
}

// gangs turns each root into one gang, or waiting when one of its gang
// PodGroups has fewer members created than its minCount.
func (f *forest) gangs(members, bound map[string]int) ([]*Gang, []Waiting) {
	var out []*Gang
	var waiting []Waiting
	for _, w := range f.broken {
		waiting = append(waiting, *w)
	}
	for key, t := range f.roots {
		g := &Gang{Namespace: t.root.Namespace, Name: t.root.Name, Composite: true, Pending: t.pending}
		if c := t.root.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			g.TopologyKey = c.Topology[0].Key
		}
		if t.root.Spec.Priority != nil {
			g.Priority = *t.root.Spec.Priority
		} else if p := t.pending[0]; p.Spec.Priority != nil {
			g.Priority = *p.Spec.Priority
		}
		var short []string
		leafKeys := make([]string, 0, len(t.leaves))
		for k := range t.leaves {
			leafKeys = append(leafKeys, k)
		}
		sort.Strings(leafKeys)
		for _, k := range leafKeys {
			minCount := 1
			if gp := t.leaves[k].Spec.SchedulingPolicy.Gang; gp != nil {
				minCount = int(gp.MinCount)
			}
			if members[k] < minCount {
				short = append(short, fmt.Sprintf("%s has %d of its minCount %d pods", k, members[k], minCount))
			}
			g.MinCount += minCount
			g.Bound += min(bound[k], minCount)
		}
		if len(short) > 0 {
			waiting = append(waiting, Waiting{Namespace: t.root.Namespace, Name: t.root.Name, Pods: t.pending,
				Reason: fmt.Sprintf("CompositePodGroup %s waits for its pods to be created: %v", key, short)})
			continue
		}
		out = append(out, g)
	}
	return out, waiting
}
