package v1alpha1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured turns an object the dynamic informer holds into the
// typed one; malformed input is an error, never a panic.
func FromUnstructured(u *unstructured.Unstructured) (cr *CapacityReservation, err error) {
	// The converter panics on some shapes of bad input (a map where a
	// scalar belongs in older versions); a bad object must not end the loop.
	defer func() {
		if r := recover(); r != nil {
			cr, err = nil, fmt.Errorf("malformed object: %v", r)
		}
	}()
	cr = &CapacityReservation{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cr); err != nil {
		return nil, fmt.Errorf("malformed object: %w", err)
	}
	return cr, nil
}

// Validate is the autoscaler's own check, the same rules as the CRD's
// schema, for objects stored without it.
func (cr *CapacityReservation) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s := cr.Spec
	switch s.Type {
	case "", TypeOpen, TypeTargeted, TypeCapacityBlock:
	default:
		add("spec.type %q: must be Open, Targeted or CapacityBlock", s.Type)
	}
	if s.Count < 0 {
		add("spec.count (%d) must not be negative", s.Count)
	}
	if s.Start != nil && s.End != nil && !s.End.After(s.Start.Time) {
		add("spec.end (%s) must be after spec.start (%s)", s.End.UTC().Format("2006-01-02T15:04:05Z"), s.Start.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if s.Type == TypeCapacityBlock && (s.Start == nil || s.End == nil) {
		add("a CapacityBlock needs both spec.start and spec.end")
	}
	if s.PricePerNodeHour != nil && s.PricePerNodeHour.Sign() < 0 {
		add("spec.pricePerNodeHour (%s) must not be negative", s.PricePerNodeHour)
	}
	return errors.Join(errs...)
}
