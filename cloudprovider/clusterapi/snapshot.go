package clusterapi

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// groupState is one scalable resource as the last Refresh saw it.
type groupState struct {
	kind     string
	obj      *unstructured.Unstructured
	min, max int
	// machines are the group's Machines, sorted by name.
	machines []*unstructured.Unstructured
	// poolIDs is a MachinePool's spec.providerIDList.
	poolIDs []string
}

// snapshot is what one Refresh saw, with the indexes that map Nodes to
// Machines and Machines to groups.
type snapshot struct {
	order   []string
	groups  map[string]*groupState
	byPID   map[string]*unstructured.Unstructured // normalized providerID
	byName  map[string]*unstructured.Unstructured // namespace/name
	groupOf map[string]string                     // machine namespace/name -> group id
	poolPID map[string]string                     // normalized providerID -> MachinePool group id
}

// problem is a scalable resource left out, and why.
type problem struct {
	kind, ref string
	obj       *unstructured.Unstructured // nil when no one object is to blame
	err       error
}

// groupID is upstream's id: <Kind>/<namespace>/<name>.
func groupID(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func (p *Provider) takeSnapshot() (*snapshot, []problem) {
	s := &snapshot{groups: map[string]*groupState{}, byPID: map[string]*unstructured.Unstructured{},
		byName: map[string]*unstructured.Unstructured{}, groupOf: map[string]string{}, poolPID: map[string]string{}}
	var problems []problem
	type selected struct {
		id  string
		sel labels.Selector
	}
	var sels []selected
	for _, kind := range []string{kindMachineDeployment, kindMachineSet, kindMachinePool} {
		l := p.scalables[kind]
		if l == nil {
			continue
		}
		objs, err := l.List(labels.Everything())
		if err != nil {
			problems = append(problems, problem{kind: kind, ref: "*", err: err})
			continue
		}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			ref := u.GetNamespace() + "/" + u.GetName()
			if kind == kindMachineSet && ownedBy(u, kindMachineDeployment) {
				continue // its MachineDeployment is the group
			}
			if _, paused := u.GetAnnotations()[p.keys.paused]; paused || !p.discovered(u) {
				continue
			}
			min, max, annotated, err := p.keys.bounds(u.GetAnnotations())
			if err != nil {
				problems = append(problems, problem{kind: kind, ref: ref, obj: u, err: err})
				continue
			}
			if !annotated || max == 0 {
				continue
			}
			id := groupID(kind, u.GetNamespace(), u.GetName())
			st := &groupState{kind: kind, obj: u, min: min, max: max}
			if kind == kindMachinePool {
				st.poolIDs, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "providerIDList")
				for _, pid := range st.poolIDs {
					s.poolPID[normalizeProviderID(pid)] = id
				}
			}
			sel, err := p.machineSelector(kind, u)
			if err != nil {
				problems = append(problems, problem{kind: kind, ref: ref, obj: u, err: err})
				continue
			}
			s.groups[id] = st
			s.order = append(s.order, id)
			sels = append(sels, selected{id: id, sel: sel})
		}
	}
	sort.Strings(s.order)
	bySel := make(map[string]labels.Selector, len(sels))
	for _, g := range sels {
		bySel[g.id] = g.sel
	}
	machines, err := p.machines.List(labels.Everything())
	if err != nil {
		problems = append(problems, problem{kind: kindMachine, ref: "*", err: err})
	}
	for _, o := range machines {
		m, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		key := m.GetNamespace() + "/" + m.GetName()
		s.byName[key] = m
		if pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); pid != "" {
			s.byPID[normalizeProviderID(pid)] = m
		}
		// The name labels Cluster API puts on Machines point at the
		// likely group; the selector decides. Only a Machine they do not
		// place is matched against every group.
		mlabels := labels.Set(m.GetLabels())
		id := ""
		for kind, label := range map[string]string{kindMachineDeployment: p.keys.deployment, kindMachineSet: p.keys.set, kindMachinePool: p.keys.pool} {
			if v := mlabels[label]; v != "" {
				if c := groupID(kind, m.GetNamespace(), v); bySel[c] != nil && bySel[c].Matches(mlabels) {
					id = c
				}
			}
		}
		for i := 0; id == "" && i < len(sels); i++ {
			if g := sels[i]; s.groups[g.id].obj.GetNamespace() == m.GetNamespace() && g.sel.Matches(mlabels) {
				id = g.id
			}
		}
		if id != "" {
			s.groups[id].machines = append(s.groups[id].machines, m)
			s.groupOf[key] = id
		}
	}
	for _, st := range s.groups {
		sort.Slice(st.machines, func(i, j int) bool { return st.machines[i].GetName() < st.machines[j].GetName() })
	}
	return s, problems
}

// discovered tells whether a scalable resource matches an auto-discovery
// spec (any of them; all when there are none).
func (p *Provider) discovered(u *unstructured.Unstructured) bool {
	if len(p.specs) == 0 {
		return true
	}
	cluster, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName")
	if cluster == "" {
		cluster = u.GetLabels()[p.keys.clusterName]
	}
	for _, s := range p.specs {
		if (s.namespace == "" || s.namespace == u.GetNamespace()) &&
			(s.clusterName == "" || s.clusterName == cluster) &&
			s.labels.Matches(labels.Set(u.GetLabels())) {
			return true
		}
	}
	return false
}

// machineSelector selects the group's Machines: spec.selector for
// MachineDeployments and MachineSets (as their controllers do), the
// pool-name label for MachinePools. An empty selector falls back to the
// name label, never to everything.
func (p *Provider) machineSelector(kind string, u *unstructured.Unstructured) (labels.Selector, error) {
	if kind == kindMachinePool {
		return labels.SelectorFromSet(labels.Set{p.keys.pool: u.GetName()}), nil
	}
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "selector")
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %v", err)
	}
	var ls metav1.LabelSelector
	if found {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
			return nil, fmt.Errorf("spec.selector: %v", err)
		}
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		key := p.keys.deployment
		if kind == kindMachineSet {
			key = p.keys.set
		}
		return labels.SelectorFromSet(labels.Set{key: u.GetName()}), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %v", err)
	}
	return sel, nil
}

func ownedBy(u *unstructured.Unstructured, kind string) bool {
	for _, r := range u.GetOwnerReferences() {
		if r.Kind == kind && r.Name != "" {
			return true
		}
	}
	return false
}

// normalizeProviderID keeps what follows the last "/", as upstream does
// (Azure VMSS ids are kept whole): Nodes and Machines of some providers
// spell the same id differently.
func normalizeProviderID(id string) string {
	if strings.HasPrefix(id, "azure://") && strings.Contains(id, "virtualMachineScaleSets") {
		return id
	}
	return id[strings.LastIndex(id, "/")+1:]
}

// pendingPrefix starts the id of a Machine that has no providerID yet.
// The tracker hands it back (as a Node named so) to give the Machine up.
const pendingPrefix = "clusterapi-pending://"

func pendingID(m *unstructured.Unstructured) string {
	return pendingPrefix + m.GetNamespace() + "/" + m.GetName()
}

// machineOfNode finds the node's Machine: a pending id, the providerID,
// then the Node's machine and cluster-namespace annotations.
func (s *snapshot) machineOfNode(node *corev1.Node, k keys) *unstructured.Unstructured {
	if s == nil || node == nil {
		return nil
	}
	for _, id := range []string{node.Spec.ProviderID, node.Name} {
		if strings.HasPrefix(id, pendingPrefix) {
			return s.byName[strings.TrimPrefix(id, pendingPrefix)]
		}
	}
	if node.Spec.ProviderID != "" {
		if m := s.byPID[normalizeProviderID(node.Spec.ProviderID)]; m != nil {
			return m
		}
	}
	if name := node.Annotations[k.nodeMachine]; name != "" {
		return s.byName[node.Annotations[k.clusterNS]+"/"+name]
	}
	return nil
}

// groupOfNode is the id of the node's group, "" for none.
func (s *snapshot) groupOfNode(node *corev1.Node, k keys) string {
	if s == nil || node == nil {
		return ""
	}
	if m := s.machineOfNode(node, k); m != nil {
		return s.groupOf[m.GetNamespace()+"/"+m.GetName()]
	}
	if node.Spec.ProviderID != "" {
		return s.poolPID[normalizeProviderID(node.Spec.ProviderID)]
	}
	return ""
}
