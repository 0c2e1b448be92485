// Package buffers serves CapacityBuffers (autoscaling.x-k8s.io/v1beta1,
// the API of upstream's cluster autoscaler and Karpenter): each pass,
// every buffer of the active-capacity strategy becomes N simulated pods
// of its pod template, which the pass plans after the real pending pods
// (they take free capacity first), so buffers never keep a real pod
// from a node. Buffer pods that fit existing or upcoming nodes stay in
// the snapshot, where scale-down must find them room before removing a
// node; the others are planned like pending pods, so nodes are added for
// them. Their DRA claims are simulated from the claim templates, so a
// buffer can hold devices. ResourceQuotas cut a buffer's replicas
// (LimitedByQuotas), charged by the API server's own quota evaluators;
// quotas that cannot be listed leave the namespace's buffers nothing. The
// API server's admission judges each buffer's pod in a dry run, and a
// buffer whose pod it rejects holds nothing. An annotation of ours limits
// a buffer to time windows. The leader writes each buffer's status when
// it changes.
package buffers

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// Reasons of the ReadyForProvisioning condition.
const (
	ReasonResolved             = "AttributesSetSuccessfully"
	ReasonInvalid              = "InvalidSpec"
	ReasonTemplateNotFound     = "PodTemplateNotFound"
	ReasonScalableNotFound     = "ScalableRefNotFound"
	ReasonScalableNotSupported = "ScalableRefNotSupported"
	ReasonScalableForbidden    = "ScalableRefForbidden"
	ReasonScalableNoPods       = "ScalableRefHasNoPods"
	ReasonNoPodTemplate        = "NoPodTemplate"
	ReasonInvalidWindows       = "InvalidActiveWindows"
)

// MaxReplicas bounds one buffer's pods: a buffer bounded only by limits
// its pods hardly touch must not flood the simulation.
const MaxReplicas = 1000

// Buffer is one buffer as a pass resolved and served it.
type Buffer struct {
	Obj *v1beta1.CapacityBuffer
	// TemplateRef and Generation are those of the template the pods were
	// made from (TemplateRef unset for a scalableRef).
	TemplateRef *v1beta1.LocalObjectRef
	Generation  *int64
	Template    *corev1.PodTemplateSpec
	// TemplateVersion changes whenever the template may have (the
	// PodTemplate's resourceVersion, the workload's generation): the
	// admission verdict is kept per version.
	TemplateVersion string
	// Wanted is what the spec asks for; Replicas what is held after the
	// quotas (0 outside the active windows).
	Wanted, Replicas int32
	// NotReady is the ReadyForProvisioning reason when the buffer could
	// not be resolved ("" when it was), Message says why.
	NotReady, Message string
	// Active is false outside the buffer's windows; Until is when that
	// changes (zero: never).
	Active bool
	Until  time.Time
	// Quota says which quota cut Replicas ("" when none did).
	Quota string
	// QuotaErr says why the namespace's quotas could not be read ("" when
	// they could); the buffer then holds nothing.
	QuotaErr string
	// AdmissionQuota is the API server's quota admission refusing the
	// buffer's pod in the dry run ("" when it did not).
	AdmissionQuota string
	Pods           []*corev1.Pod
	// What the simulation did: pods on existing or upcoming nodes (of
	// them, ReadyFit on nodes Ready now), pods planned on new nodes, pods
	// left without room (of them, Infeasible: no template can ever hold
	// them) and why.
	Fit, ReadyFit, Planned int
	Unplaced, Infeasible   int
	Why                    string
	ScaleUps               []string
	// OneShot is what the pass learned of a one-shot buffer (nil for
	// one that refills).
	OneShot *oneShot
}

// fromPodTemplate takes the shape from the namespace's PodTemplate name
// (named by field).
func (b *Buffer) fromPodTemplate(src Source, name, field string) error {
	t, err := src.PodTemplate(b.Obj.Namespace, name)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("PodTemplate %s/%s (%s) not found", b.Obj.Namespace, name, field)
	}
	if err != nil {
		return err
	}
	b.TemplateRef = &v1beta1.LocalObjectRef{Name: t.Name}
	b.Generation = &t.Generation
	b.Template = &t.Template
	b.TemplateVersion = "PodTemplate/" + t.ResourceVersion
	return nil
}

// statusShaped says the buffer takes its shape from its status (neither
// ref in the spec): the status's podTemplateRef is its input, never
// cleared.
func (b *Buffer) statusShaped() bool {
	return b.Obj.Spec.PodTemplateRef == nil && b.Obj.Spec.ScalableRef == nil
}

// Key is namespace/name.
func (b *Buffer) Key() string { return b.Obj.Namespace + "/" + b.Obj.Name }

// resolve reads a buffer's template and replica count (before quotas).
func resolve(obj *v1beta1.CapacityBuffer, src Source, now time.Time) *Buffer {
	b := &Buffer{Obj: obj, Active: true}
	fail := func(reason string, err error) *Buffer {
		b.NotReady, b.Message = reason, err.Error()
		return b
	}
	if err := obj.Validate(); err != nil {
		return fail(ReasonInvalid, err)
	}
	ws, err := ParseWindows(obj.Annotations[v1beta1.ActiveWindowsAnnotation])
	if err != nil {
		return fail(ReasonInvalidWindows, fmt.Errorf("annotation %s: %w", v1beta1.ActiveWindowsAnnotation, err))
	}
	b.Active, b.Until = ws.Active(now)
	var wl *Workload
	switch {
	case obj.Spec.PodTemplateRef != nil:
		if err := b.fromPodTemplate(src, obj.Spec.PodTemplateRef.Name, "spec.podTemplateRef"); err != nil {
			return fail(ReasonTemplateNotFound, err)
		}
	case obj.Spec.ScalableRef != nil:
		ref := *obj.Spec.ScalableRef
		wl, err = src.Workload(obj.Namespace, ref)
		var unsupported *UnsupportedKindError
		var noPods *NoPodsError
		switch {
		case errors.As(err, &unsupported):
			return fail(ReasonScalableNotSupported, err)
		case errors.As(err, &noPods):
			return fail(ReasonScalableNoPods, err)
		case apierrors.IsNotFound(err):
			return fail(ReasonScalableNotFound, fmt.Errorf("%s %s/%s not found", ref.Kind, obj.Namespace, ref.Name))
		case apierrors.IsForbidden(err):
			return fail(ReasonScalableForbidden, fmt.Errorf("the autoscaler may not read %s %s/%s or its scale subresource "+
				"(grant get on the resource and its /scale to its ClusterRole): %w", ref.Kind, obj.Namespace, ref.Name, err))
		case err != nil:
			return fail(ReasonScalableNotFound, err)
		}
		b.Generation = &wl.Generation
		b.Template = wl.Template
		b.TemplateVersion = wl.Version
		if b.TemplateVersion == "" {
			b.TemplateVersion = fmt.Sprintf("%s/%d", ref.Kind, wl.Generation)
		}
	default:
		// Neither ref, as upstream's schema allows: upstream takes the
		// shape from status.podTemplateRef, which a controller of the
		// user's writes (upstream splits the buffer's translation from
		// the autoscaler), and holds as many pods as the limits allow.
		ref := obj.Status.PodTemplateRef
		if ref == nil || ref.Name == "" {
			return fail(ReasonNoPodTemplate, errors.New("the buffer names neither spec.podTemplateRef nor spec.scalableRef, "+
				"and no controller has named a PodTemplate in status.podTemplateRef: there is no pod shape to hold"))
		}
		if err := b.fromPodTemplate(src, ref.Name, "status.podTemplateRef"); err != nil {
			return fail(ReasonTemplateNotFound, err)
		}
	}
	n, err := wanted(obj.Spec, wl, templateRequests(b.Template, obj.Namespace))
	if err != nil {
		return fail(ReasonInvalid, err)
	}
	b.Wanted = n
	return b
}

// templateRequests are what one pod of the template requests (init
// containers and overhead counted as the scheduler counts them).
func templateRequests(t *corev1.PodTemplateSpec, namespace string) corev1.ResourceList {
	return resourcehelper.PodRequests(&corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}, resourcehelper.PodResourcesOptions{})
}

// wanted is upstream's rule: replicas, or percentage of the workload's
// replicas rounded up, the larger if both are set; limits cap the sum of
// the pods' requests, and alone give as many pods as fit them.
func wanted(spec v1beta1.CapacityBufferSpec, wl *Workload, perPod corev1.ResourceList) (int32, error) {
	n := int64(-1) // unbounded
	if spec.Replicas != nil {
		n = int64(*spec.Replicas)
	}
	if spec.Percentage != nil && wl != nil {
		p := int64(math.Ceil(float64(wl.Replicas) * float64(*spec.Percentage) / 100))
		n = max(n, p)
	}
	if spec.Limits != nil {
		limit := int64(-1)
		for name, q := range *spec.Limits {
			per, ok := perPod[corev1.ResourceName(name)]
			if !ok || per.Sign() <= 0 {
				continue // the pods take none of it
			}
			k := fits(q, per)
			if limit < 0 || k < limit {
				limit = k
			}
		}
		switch {
		case n < 0:
			n = limit
		case limit >= 0:
			n = min(n, limit)
		}
	}
	switch {
	case n < 0 && spec.Percentage != nil:
		return 0, fmt.Errorf("spec.percentage applies to a scalableRef only, and neither replicas nor limits bound the buffer")
	case n < 0:
		return 0, fmt.Errorf("nothing bounds the buffer: set replicas, percentage (with scalableRef) or limits on resources its pods request")
	case n > MaxReplicas:
		return 0, fmt.Errorf("the buffer resolves to %d pods, more than the %d this autoscaler simulates per buffer", n, MaxReplicas)
	}
	return int32(n), nil
}

// fits is how many per fit into total, rounded down.
func fits(total, per resource.Quantity) int64 {
	if total.Sign() <= 0 {
		return 0
	}
	// Milli-units are exact for CPUs and small counts; huge quantities
	// (memory in bytes) are divided in whole units, still exact enough.
	const milliSafe = math.MaxInt64 / 1000
	if total.Value() < milliSafe/1000 && per.Value() < milliSafe/1000 {
		return total.MilliValue() / per.MilliValue()
	}
	return total.Value() / max(per.Value(), 1)
}
