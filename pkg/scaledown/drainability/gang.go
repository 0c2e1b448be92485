package drainability

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
)

// Gangs knows the running members of every gang PodGroup. A gang runs
// only while minCount members do, so evicting one member can stop the
// whole job and hold the rest of its capacity hostage.
type Gangs struct {
	groups  map[string]*schedulingv1beta1.PodGroup
	members map[string][]*corev1.Pod // bound, not finished, by group key
}

// NewGangs indexes the PodGroups and their bound members.
func NewGangs(groups []*schedulingv1beta1.PodGroup, pods []*corev1.Pod) *Gangs {
	g := &Gangs{groups: map[string]*schedulingv1beta1.PodGroup{}, members: map[string][]*corev1.Pod{}}
	for _, pg := range groups {
		if pg.Spec.SchedulingPolicy.Gang != nil {
			g.groups[pg.Namespace+"/"+pg.Name] = pg
		}
	}
	for _, p := range pods {
		key, ok := groupKey(p)
		if !ok || g.groups[key] == nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || isTerminal(p) {
			continue
		}
		g.members[key] = append(g.members[key], p)
	}
	return g
}

// Check tells whether the pods leaving with a set of nodes (removing, the
// node names) may take the gang members among them:
//   - every running member of the gang leaves together and the caller
//     re-places them all (the whole gang moves), or
//   - the PodGroup's disruption mode is Single (members may be disrupted
//     one by one) and the gang keeps at least minCount running members.
//
// Mode All, or too few members left, keeps the node. It returns "" when
// the move is allowed, else why not.
func (g *Gangs) Check(leaving []*corev1.Pod, removing map[string]bool) string {
	counted := map[string]int{}
	for _, p := range leaving {
		if key, ok := groupKey(p); ok && g.groups[key] != nil {
			counted[key]++
		}
	}
	for key, n := range counted {
		pg := g.groups[key]
		members := g.members[key]
		whole := true
		for _, m := range members {
			if !removing[m.Spec.NodeName] {
				whole = false
				break
			}
		}
		if whole {
			continue
		}
		minCount := int(pg.Spec.SchedulingPolicy.Gang.MinCount)
		left := len(members) - n
		single := pg.Spec.DisruptionMode != nil && pg.Spec.DisruptionMode.Single != nil
		if single && left >= minCount {
			continue
		}
		mode := "All"
		if single {
			mode = "Single"
		}
		return fmt.Sprintf("gang %s (minCount %d, disruption mode %s) would keep %d of %d running members", key, minCount, mode, left, len(members))
	}
	return ""
}

func groupKey(p *corev1.Pod) (string, bool) {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil || *p.Spec.SchedulingGroup.PodGroupName == "" {
		return "", false
	}
	return p.Namespace + "/" + *p.Spec.SchedulingGroup.PodGroupName, true
}

// MemberNodes returns the nodes running members of the gangs the pods
// belong to, sorted: the nodes a gang must leave together to move whole.
func (g *Gangs) MemberNodes(pods []*corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		key, ok := groupKey(p)
		if !ok || g.groups[key] == nil {
			continue
		}
		for _, m := range g.members[key] {
			if !seen[m.Spec.NodeName] {
				seen[m.Spec.NodeName] = true
				out = append(out, m.Spec.NodeName)
			}
		}
	}
	sort.Strings(out)
	return out
}
