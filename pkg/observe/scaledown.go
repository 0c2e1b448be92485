package observe

import (
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
)

// scaleDownListers are the informers only scale-down reads: budgets, and
// the built-in controllers a pod may name as its owner.
type scaleDownListers struct {
	pdbs         policylisters.PodDisruptionBudgetLister
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
	jobs         batchlisters.JobLister
	rcs          corelisters.ReplicationControllerLister
}

// newScaleDownListers registers them (before the factory starts).
func newScaleDownListers(f informers.SharedInformerFactory) scaleDownListers {
	return scaleDownListers{
		pdbs:         f.Policy().V1().PodDisruptionBudgets().Lister(),
		replicaSets:  f.Apps().V1().ReplicaSets().Lister(),
		statefulSets: f.Apps().V1().StatefulSets().Lister(),
		daemonSets:   f.Apps().V1().DaemonSets().Lister(),
		jobs:         f.Batch().V1().Jobs().Lister(),
		rcs:          f.Core().V1().ReplicationControllers().Lister(),
	}
}

// PodDisruptionBudgets lists the budgets (policy/v1) from the cache.
func (o *Observer) PodDisruptionBudgets() ([]*policyv1.PodDisruptionBudget, error) {
	return o.scaleDown.pdbs.List(everything)
}

// ControllerExists tells whether the controller a pod in namespace names
// still exists (upstream's ControllerNotFound rule: an evicted pod whose
// controller is gone is never recreated). known is false for kinds other
// than the built-in controllers: those are not judged.
func (o *Observer) ControllerExists(namespace string, ref *metav1.OwnerReference) (exists, known bool) {
	l := o.scaleDown
	var err error
	switch ref.APIVersion + "/" + ref.Kind {
	case "apps/v1/ReplicaSet":
		_, err = l.replicaSets.ReplicaSets(namespace).Get(ref.Name)
	case "apps/v1/StatefulSet":
		_, err = l.statefulSets.StatefulSets(namespace).Get(ref.Name)
	case "apps/v1/DaemonSet":
		_, err = l.daemonSets.DaemonSets(namespace).Get(ref.Name)
	case "batch/v1/Job":
		_, err = l.jobs.Jobs(namespace).Get(ref.Name)
	case "v1/ReplicationController":
		_, err = l.rcs.ReplicationControllers(namespace).Get(ref.Name)
	default:
		return false, false
	}
	if apierrors.IsNotFound(err) {
		return false, true
	}
	// Any other error: not known, so a cache problem never blocks or
	// allows a removal by itself.
	return err == nil, err == nil
}
