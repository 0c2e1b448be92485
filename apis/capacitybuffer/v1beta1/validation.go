package v1beta1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured turns an object the dynamic informer holds into the
// typed one; malformed input is an error, never a panic.
func FromUnstructured(u *unstructured.Unstructured) (b *CapacityBuffer, err error) {
	// The converter panics on some shapes of bad input; a bad object must
	// not end the pass.
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("malformed object: %v", r)
		}
	}()
	b = &CapacityBuffer{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("malformed object: %w", err)
	}
	return b, nil
}

// Strategy is the buffer's provisioning strategy, defaulted as the CRD
// defaults it.
func (b *CapacityBuffer) Strategy() string {
	if b.Spec.ProvisioningStrategy == nil || *b.Spec.ProvisioningStrategy == "" {
		return ActiveCapacity
	}
	return *b.Spec.ProvisioningStrategy
}

// Refill is the buffer's refill strategy, defaulted as the CRD defaults
// it.
func (b *CapacityBuffer) Refill() string {
	if b.Spec.RefillStrategy == nil || *b.Spec.RefillStrategy == "" {
		return RefillRecreate
	}
	return *b.Spec.RefillStrategy
}

// OneShot says consumed capacity is not recreated (refillStrategy none).
func (b *CapacityBuffer) OneShot() bool { return b.Refill() == RefillNone }

// Validate is the CRD's schema checked again, for objects stored without
// it (an older or hand-made CRD).
func (b *CapacityBuffer) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s := b.Spec
	// Neither ref is allowed, as upstream's schema allows it (the shape
	// then comes from status.podTemplateRef); both are not.
	if s.PodTemplateRef != nil && s.ScalableRef != nil {
		add("only one of spec.podTemplateRef and spec.scalableRef may be set")
	}
	if s.PodTemplateRef != nil {
		if s.PodTemplateRef.Name == "" {
			add("spec.podTemplateRef.name must not be empty")
		}
		if s.Replicas == nil && s.Limits == nil {
			add("a buffer with spec.podTemplateRef needs spec.replicas or spec.limits")
		}
	}
	if r := s.ScalableRef; r != nil && (r.Kind == "" || r.Name == "") {
		add("spec.scalableRef needs kind and name")
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		add("spec.replicas (%d) must not be negative", *s.Replicas)
	}
	if s.Percentage != nil && *s.Percentage < 0 {
		add("spec.percentage (%d) must not be negative", *s.Percentage)
	}
	if s.Limits != nil {
		for name, q := range *s.Limits {
			if q.Sign() < 0 {
				add("spec.limits[%s] (%s) must not be negative", name, q.String())
			}
		}
	}
	switch b.Refill() {
	case RefillRecreate:
	case RefillNone:
		// The proposal's first scope: the target is exactly replicas and
		// fixed, so replicas - consumedReplicas is what remains.
		if s.PodTemplateRef == nil || s.Replicas == nil {
			add("a one-shot buffer (spec.refillStrategy none) needs spec.podTemplateRef and spec.replicas")
		}
		if s.Limits != nil || s.Percentage != nil {
			add("a one-shot buffer (spec.refillStrategy none) takes neither spec.limits nor spec.percentage: its size is spec.replicas")
		}
	default:
		add("spec.refillStrategy %q is not one of recreate, none", b.Refill())
	}
	if d := s.FillDeadlineSeconds; d != nil && *d < 1 {
		add("spec.fillDeadlineSeconds (%d) must be at least 1", *d)
	}
	return errors.Join(errs...)
}
