package drainability

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
)

// Gangs answers, for every taker of pods (scale-down, the drains of
// ending capacity blocks), one question: may these pods leave together?
// It knows the running members of the PodGroups whose disruption is
// bounded, and the CompositePodGroups above them.
//
// The rules, from the disruptionMode fields of scheduling.k8s.io:
//   - A PodGroup is disrupted when a member leaves and its mode is All,
//     or when it keeps fewer running members than its gang's minCount
//     (at least one). Mode Single lets members go one by one above that.
//   - A CompositePodGroup is disrupted when a child group is and its mode
//     is All ("children can only be disrupted together"), or when it
//     keeps fewer undisrupted running children than its gang's
//     minGroupCount (at least one). So a child's disruption is bounded by
//     its parent's mode, and so on up the hierarchy.
//   - A disrupted group is allowed only if it moves whole: every running
//     pod under it leaves at once and the caller re-places them all.
//
// An unset mode on a gang PodGroup counts as All (the API server defaults
// it to Single; an object that says nothing is not trusted to mean it).
// A basic PodGroup or CompositePodGroup counts only when it says All.
type Gangs struct {
	groups     map[string]*group // PodGroups, by namespace/name
	composites map[string]*group // CompositePodGroups, by namespace/name
}

// group is a PodGroup or a CompositePodGroup, linked to its parent.
type group struct {
	kind, key string // "gang", "pod group" or "composite pod group"; namespace/name
	composite bool
	all       bool
	// min is a gang PodGroup's minCount or a gang composite's
	// minGroupCount; 0 for basic ones.
	min      int
	parent   *group
	children []*group
	members  []*corev1.Pod // a PodGroup's bound, unfinished pods
	// nodes run the pods of the whole subtree, sorted.
	nodes []string
	// cyclic: the parent chain loops (bad input); nothing under it moves.
	cyclic bool
}

// NewGangs indexes the groups and their bound members. composites may
// be nil (the cluster does not serve them).
func NewGangs(groups []*schedulingv1beta1.PodGroup, composites []*schedulingv1alpha3.CompositePodGroup, pods []*corev1.Pod) *Gangs {
	g := &Gangs{groups: map[string]*group{}, composites: map[string]*group{}}
	for _, c := range composites {
		x := &group{kind: "composite pod group", key: c.Namespace + "/" + c.Name, composite: true}
		x.all = c.Spec.DisruptionMode != nil && c.Spec.DisruptionMode.All != nil
		if gang := c.Spec.SchedulingPolicy.Gang; gang != nil {
			x.min = int(gang.MinGroupCount)
		}
		g.composites[x.key] = x
	}
	parentOf := func(ns string, name *string) *group {
		if name == nil || *name == "" {
			return nil
		}
		return g.composites[ns+"/"+*name]
	}
	for _, c := range composites {
		x := g.composites[c.Namespace+"/"+c.Name]
		x.parent = parentOf(c.Namespace, c.Spec.ParentCompositePodGroupName)
	}
	for _, pg := range groups {
		x := &group{kind: "gang", key: pg.Namespace + "/" + pg.Name, parent: parentOf(pg.Namespace, pg.Spec.ParentCompositePodGroupName)}
		mode := pg.Spec.DisruptionMode
		if gang := pg.Spec.SchedulingPolicy.Gang; gang != nil {
			x.min = int(gang.MinCount)
			x.all = mode == nil || mode.Single == nil
		} else {
			x.kind = "pod group"
			x.all = mode != nil && mode.All != nil
		}
		// A basic Single group under no composite bounds nothing.
		if x.all || x.min > 0 || x.parent != nil {
			g.groups[x.key] = x
		}
	}
	for _, p := range pods {
		key, ok := groupKey(p)
		x := g.groups[key]
		if !ok || x == nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || isTerminal(p) {
			continue
		}
		x.members = append(x.members, p)
	}
	g.link()
	return g
}

// link fills children and nodes, and marks the groups whose parent chain
// loops.
func (g *Gangs) link() {
	all := make([]*group, 0, len(g.groups)+len(g.composites))
	for _, x := range g.composites {
		all = append(all, x)
	}
	for _, x := range g.groups {
		all = append(all, x)
	}
	for _, x := range all {
		seen := map[*group]bool{x: true}
		for p := x.parent; p != nil; p = p.parent {
			if seen[p] {
				x.cyclic = true
				break
			}
			seen[p] = true
		}
	}
	for _, x := range all {
		if x.parent != nil {
			x.parent.children = append(x.parent.children, x)
		}
		if len(x.members) == 0 || x.cyclic {
			continue
		}
		for a := x; a != nil; a = a.parent { // ends: x's chain has no loop
			for _, m := range x.members {
				a.nodes = append(a.nodes, m.Spec.NodeName)
			}
		}
	}
	for _, x := range all {
		sort.Strings(x.nodes)
		x.nodes = compact(x.nodes)
	}
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Check tells whether the pods leaving with a set of nodes (removing, the
// node names) may take the group members among them. It returns "" when
// the move is allowed, else why not.
func (g *Gangs) Check(leaving []*corev1.Pod, removing map[string]bool) string {
	reason, _ := g.check(leaving, removing)
	return reason
}

// check is Check that also returns the group that would be split.
func (g *Gangs) check(leaving []*corev1.Pod, removing map[string]bool) (string, *group) {
	counted := map[*group]int{}
	for _, p := range leaving {
		if key, ok := groupKey(p); ok && g.groups[key] != nil {
			counted[g.groups[key]]++
		}
	}
	touched := make([]*group, 0, len(counted))
	for x := range counted {
		touched = append(touched, x)
	}
	sort.Slice(touched, func(i, j int) bool { return touched[i].key < touched[j].key })
	e := evaluation{counted: counted, removing: removing, memo: map[*group]bool{}}
	for _, x := range touched {
		if x.cyclic {
			return fmt.Sprintf("%s %s: its parent CompositePodGroups form a loop; none of its members is moved", x.kind, x.key), x
		}
		// Each group from the member's up is asked, so the reason names
		// the lowest group that would be split.
		for a := x; a != nil; a = a.parent {
			if reason := e.check(a); reason != "" {
				return reason, a
			}
		}
	}
	return "", nil
}

// Hold is for nodes that all lose their pods at once (leaving, by node
// name; the drains of ending capacity blocks): it returns the nodes to
// hold back, each with why, so that what the others lose splits no
// group. A group that would be split keeps every one of its members
// that would leave; holding a node can split another group, so this
// repeats until nothing more is held.
func (g *Gangs) Hold(leaving map[string][]*corev1.Pod) map[string]string {
	held := map[string]string{}
	nodes := make([]string, 0, len(leaving))
	for n := range leaving {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for {
		removing := map[string]bool{}
		var pods []*corev1.Pod
		for _, n := range nodes {
			if _, h := held[n]; !h {
				removing[n] = true
				pods = append(pods, leaving[n]...)
			}
		}
		reason, x := g.check(pods, removing)
		if x == nil {
			return held
		}
		// x is disrupted, so a pod under it leaves from a node not held
		// yet: every round holds one more node at least.
		for _, n := range nodes {
			if _, h := held[n]; h {
				continue
			}
			for _, p := range leaving[n] {
				if g.under(p, x) {
					held[n] = reason
					break
				}
			}
		}
	}
}

// under tells whether pod p belongs to x or a group below it.
func (g *Gangs) under(p *corev1.Pod, x *group) bool {
	key, ok := groupKey(p)
	pg := g.groups[key]
	if !ok || pg == nil {
		return false
	}
	if pg == x || pg.cyclic {
		return pg == x
	}
	for a := pg.parent; a != nil; a = a.parent {
		if a == x {
			return true
		}
	}
	return false
}

// evaluation is one Check's state: the leaving members per PodGroup and
// what is known to be disrupted.
type evaluation struct {
	counted  map[*group]int
	removing map[string]bool
	memo     map[*group]bool
}

// check returns why x's disruption is not allowed, or "".
func (e *evaluation) check(x *group) string {
	if !e.disrupted(x) || e.whole(x) {
		return ""
	}
	if !x.composite {
		n := e.counted[x]
		return fmt.Sprintf("%s %s (minCount %d, disruption mode %s) would keep %d of %d running members",
			x.kind, x.key, x.min, mode(x.all), len(x.members)-n, len(x.members))
	}
	var hit []string
	running := 0
	for _, c := range x.children {
		if len(c.nodes) > 0 {
			running++
		}
		if e.disrupted(c) {
			hit = append(hit, c.key)
		}
	}
	sort.Strings(hit)
	return fmt.Sprintf("composite pod group %s (minGroupCount %d, disruption mode %s) would have child group(s) %s disrupted without the rest (%d running)",
		x.key, x.min, mode(x.all), strings.Join(hit, ", "), running)
}

// disrupted tells whether the leaving pods disrupt x.
func (e *evaluation) disrupted(x *group) bool {
	if d, ok := e.memo[x]; ok {
		return d
	}
	e.memo[x] = false // a loop is cut here; Check refuses those anyway
	var d bool
	if !x.composite {
		n := e.counted[x]
		d = n > 0 && (x.all || len(x.members)-n < max(x.min, 1))
	} else {
		running, hit := 0, 0
		for _, c := range x.children {
			if len(c.nodes) > 0 {
				running++
			}
			if e.disrupted(c) {
				hit++
			}
		}
		d = hit > 0 && (x.all || running-hit < max(x.min, 1))
	}
	e.memo[x] = d
	return d
}

// whole tells whether every running pod under x leaves.
func (e *evaluation) whole(x *group) bool {
	for _, n := range x.nodes {
		if !e.removing[n] {
			return false
		}
	}
	return true
}

func mode(all bool) string {
	if all {
		return "All"
	}
	return "Single"
}

func groupKey(p *corev1.Pod) (string, bool) {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil || *p.Spec.SchedulingGroup.PodGroupName == "" {
		return "", false
	}
	return p.Namespace + "/" + *p.Spec.SchedulingGroup.PodGroupName, true
}

// MemberNodes returns, sorted, the nodes that must go with the pods for
// their groups to move whole: for each pod's group, the nodes of the
// highest group its own disruption would disrupt (itself, or the
// composites above it whose mode is All or whose minGroupCount one child
// less would break).
func (g *Gangs) MemberNodes(pods []*corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		key, ok := groupKey(p)
		x := g.groups[key]
		if !ok || x == nil || x.cyclic {
			continue
		}
		domain := x
		for p := x.parent; p != nil; p = p.parent {
			running := 0
			for _, c := range p.children {
				if len(c.nodes) > 0 {
					running++
				}
			}
			if !p.all && running-1 >= max(p.min, 1) {
				break
			}
			domain = p
		}
		for _, n := range domain.nodes {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}
