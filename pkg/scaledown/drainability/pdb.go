package drainability

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PDBs tracks, across the nodes of one pass, how many more pods each
// PodDisruptionBudget lets go: two nodes whose pods share a budget of one
// disruption cannot both be drained on the strength of it.
type PDBs struct {
	budgets []*budget
	// Problems are budgets that cannot be used as written (an invalid
	// selector, one that selects no pod), for warnings; they protect
	// nothing and never block.
	Problems []PDBProblem
}

// PDBProblem is bad input found in a PodDisruptionBudget.
type PDBProblem struct {
	PDB     *policyv1.PodDisruptionBudget
	Reason  string
	Message string
}

type budget struct {
	pdb       *policyv1.PodDisruptionBudget
	selector  labels.Selector
	remaining int32
}

// NewPDBs indexes the budgets against the pods they may cover.
func NewPDBs(pdbs []*policyv1.PodDisruptionBudget, pods []*corev1.Pod) *PDBs {
	t := &PDBs{}
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Problems = append(t.Problems, PDBProblem{PDB: pdb, Reason: "InvalidSelector",
				Message: fmt.Sprintf("selector of PodDisruptionBudget %s/%s is invalid, the budget is ignored: %v", pdb.Namespace, pdb.Name, err)})
			continue
		}
		b := &budget{pdb: pdb, selector: sel, remaining: pdb.Status.DisruptionsAllowed}
		if pdb.Spec.Selector == nil || !selectsAny(b, pods) {
			// A nil selector selects nothing in policy/v1.
			t.Problems = append(t.Problems, PDBProblem{PDB: pdb, Reason: "SelectsNoPods",
				Message: fmt.Sprintf("PodDisruptionBudget %s/%s selects no pod", pdb.Namespace, pdb.Name)})
			continue
		}
		t.budgets = append(t.budgets, b)
	}
	return t
}

func selectsAny(b *budget, pods []*corev1.Pod) bool {
	for _, p := range pods {
		if b.covers(p) {
			return true
		}
	}
	return false
}

func (b *budget) covers(pod *corev1.Pod) bool {
	return b.pdb.Namespace == pod.Namespace && b.selector.Matches(labels.Set(pod.Labels))
}

// Covered tells whether any budget covers the pod.
func (t *PDBs) Covered(pod *corev1.Pod) bool {
	for _, b := range t.budgets {
		if b.covers(pod) {
			return true
		}
	}
	return false
}

// Take checks that every budget covering the pods has room for all of
// them and, if so, spends that room; otherwise nothing is spent and the
// first budget short of room is named.
func (t *PDBs) Take(pods []*corev1.Pod) (ok bool, blocked *corev1.Pod, detail string) {
	need := map[*budget]int32{}
	for _, p := range pods {
		for _, b := range t.budgets {
			if !b.covers(p) {
				continue
			}
			need[b]++
			if need[b] > b.remaining {
				return false, p, fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions, pod %s would be one too many",
					b.pdb.Namespace, b.pdb.Name, b.pdb.Status.DisruptionsAllowed, p.Name)
			}
		}
	}
	for b, n := range need {
		b.remaining -= n
	}
	return true, nil, ""
}

// Give returns room taken for pods whose node turned out not removable.
func (t *PDBs) Give(pods []*corev1.Pod) {
	for _, p := range pods {
		for _, b := range t.budgets {
			if b.covers(p) {
				b.remaining++
			}
		}
	}
}
