package observe

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/informers"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// scaleDownListers are the informers only scale-down reads.
type scaleDownListers struct {
	pdbs policylisters.PodDisruptionBudgetLister
}

// newScaleDownListers registers them (before the factory starts).
func newScaleDownListers(f informers.SharedInformerFactory) scaleDownListers {
	return scaleDownListers{pdbs: f.Policy().V1().PodDisruptionBudgets().Lister()}
}

// PodDisruptionBudgets lists the budgets (policy/v1) from the cache.
func (o *Observer) PodDisruptionBudgets() ([]*policyv1.PodDisruptionBudget, error) {
	return o.scaleDown.pdbs.List(everything)
}
