package buffers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// Source is what a pass reads besides the cluster state: the buffers and
// the objects they name.
type Source interface {
	// Buffers are the CapacityBuffer objects (shared: read-only).
	Buffers() []*unstructured.Unstructured
	PodTemplate(namespace, name string) (*corev1.PodTemplate, error)
	Workload(namespace string, ref v1beta1.ScalableRef) (*Workload, error)
	Quotas(namespace string) ([]*corev1.ResourceQuota, error)
}

// Workload is what a scalableRef resolves to: its pod template, its
// replicas (what percentage counts from) and its generation.
type Workload struct {
	Template   *corev1.PodTemplateSpec
	Replicas   int32
	Generation int64
	// Version changes whenever the template may have; "": the kind and
	// generation say it.
	Version string
}

// Listers is a Source over informer listers; List lists the buffers.
type Listers struct {
	List         func() []*unstructured.Unstructured
	PodTemplates corelisters.PodTemplateLister
	Quota        corelisters.ResourceQuotaLister
	Deployments  appslisters.DeploymentLister
	ReplicaSets  appslisters.ReplicaSetLister
	StatefulSets appslisters.StatefulSetLister
	Jobs         batchlisters.JobLister
	// Scales resolves the kinds above do not cover through their scale
	// subresource; nil: those kinds are not supported.
	Scales *Scales
}

var _ Source = &Listers{}

// Buffers lists the buffers.
func (l *Listers) Buffers() []*unstructured.Unstructured {
	if l.List == nil {
		return nil
	}
	return l.List()
}

// PodTemplate gets a PodTemplate.
func (l *Listers) PodTemplate(namespace, name string) (*corev1.PodTemplate, error) {
	return l.PodTemplates.PodTemplates(namespace).Get(name)
}

// Quotas lists a namespace's ResourceQuotas; without a lister the quotas
// are unknown, an error (never "no quotas").
func (l *Listers) Quotas(namespace string) ([]*corev1.ResourceQuota, error) {
	if l.Quota == nil {
		return nil, fmt.Errorf("no ResourceQuota lister")
	}
	return l.Quota.ResourceQuotas(namespace).List(labels.Everything())
}

// UnsupportedKindError is a scalableRef to a kind the autoscaler cannot
// read replicas and a pod shape from; Why says what is missing.
type UnsupportedKindError struct {
	Ref v1beta1.ScalableRef
	Why string
}

func (e *UnsupportedKindError) Error() string {
	why := e.Why
	if why == "" {
		why = "only Deployment, ReplicaSet, StatefulSet of apps and Job of batch are read without a scale resolver"
	}
	return fmt.Sprintf("scalableRef kind %q of API group %q is not supported: %s", e.Ref.Kind, e.Ref.APIGroup, why)
}

// Workload reads a Deployment, ReplicaSet, StatefulSet or Job from the
// informers, any other kind through its scale subresource. Replicas
// unset count as 1, as the API server defaults them; a Job's are its
// parallelism (a Job has no scale subresource; upstream reads it too).
func (l *Listers) Workload(namespace string, ref v1beta1.ScalableRef) (*Workload, error) {
	one := func(p *int32) int32 {
		if p == nil {
			return 1
		}
		return *p
	}
	switch {
	case ref.APIGroup == "apps" && ref.Kind == "Deployment" && l.Deployments != nil:
		d, err := l.Deployments.Deployments(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return &Workload{Template: &d.Spec.Template, Replicas: one(d.Spec.Replicas), Generation: d.Generation}, nil
	case ref.APIGroup == "apps" && ref.Kind == "ReplicaSet" && l.ReplicaSets != nil:
		r, err := l.ReplicaSets.ReplicaSets(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return &Workload{Template: &r.Spec.Template, Replicas: one(r.Spec.Replicas), Generation: r.Generation}, nil
	case ref.APIGroup == "apps" && ref.Kind == "StatefulSet" && l.StatefulSets != nil:
		s, err := l.StatefulSets.StatefulSets(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return &Workload{Template: &s.Spec.Template, Replicas: one(s.Spec.Replicas), Generation: s.Generation}, nil
	case ref.APIGroup == "batch" && ref.Kind == "Job" && l.Jobs != nil:
		j, err := l.Jobs.Jobs(namespace).Get(ref.Name)
		if err != nil {
			return nil, err
		}
		return &Workload{Template: &j.Spec.Template, Replicas: one(j.Spec.Parallelism), Generation: j.Generation}, nil
	}
	if l.Scales != nil {
		return l.Scales.Workload(namespace, ref)
	}
	return nil, &UnsupportedKindError{Ref: ref}
}
