package reservations

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Rejected is a CapacityReservation object the autoscaler ignores, and why.
type Rejected struct {
	Object *unstructured.Unstructured
	Err    error
}

// FromObjects converts the CapacityReservation objects the informer holds;
// those that do not convert or do not validate (the API server's schema may
// be older or relaxed) come back as rejected, never as a panic.
func FromObjects(objs []*unstructured.Unstructured) ([]*Reservation, []*v1alpha1.CapacityReservation, []Rejected) {
	var out []*Reservation
	var typed []*v1alpha1.CapacityReservation
	var rejected []Rejected
	for _, u := range objs {
		cr, err := Convert(u)
		if err == nil {
			err = Validate(cr)
		}
		if err != nil {
			rejected = append(rejected, Rejected{Object: u, Err: err})
			continue
		}
		out = append(out, fromCRD(cr))
		typed = append(typed, cr)
	}
	return out, typed, rejected
}

// Convert turns an unstructured object into the typed one.
func Convert(u *unstructured.Unstructured) (cr *v1alpha1.CapacityReservation, err error) {
	// The converter panics on some shapes of bad input (a map where a
	// scalar belongs in older versions); a bad object must not end the loop.
	defer func() {
		if r := recover(); r != nil {
			cr, err = nil, fmt.Errorf("malformed object: %v", r)
		}
	}()
	cr = &v1alpha1.CapacityReservation{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cr); err != nil {
		return nil, fmt.Errorf("malformed object: %w", err)
	}
	return cr, nil
}

// Validate is the autoscaler's own check, the same rules as the CRD's
// schema, for objects stored without it.
func Validate(cr *v1alpha1.CapacityReservation) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	s := cr.Spec
	switch s.Type {
	case "", v1alpha1.TypeOpen, v1alpha1.TypeTargeted, v1alpha1.TypeCapacityBlock:
	default:
		add("spec.type %q: must be Open, Targeted or CapacityBlock", s.Type)
	}
	if s.Count < 0 {
		add("spec.count (%d) must not be negative", s.Count)
	}
	if s.Start != nil && s.End != nil && !s.End.After(s.Start.Time) {
		add("spec.end (%s) must be after spec.start (%s)", s.End.UTC().Format("2006-01-02T15:04:05Z"), s.Start.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if s.Type == v1alpha1.TypeCapacityBlock && (s.Start == nil || s.End == nil) {
		add("a CapacityBlock needs both spec.start and spec.end")
	}
	if len(s.NodeGroups) == 0 && s.InstanceType == "" {
		add("spec.nodeGroups or spec.instanceType is required")
	}
	if s.PricePerNodeHour != nil && s.PricePerNodeHour.Sign() < 0 {
		add("spec.pricePerNodeHour (%s) must not be negative", s.PricePerNodeHour)
	}
	return errors.Join(errs...)
}

func fromCRD(cr *v1alpha1.CapacityReservation) *Reservation {
	s := cr.Spec
	r := &Reservation{ID: cr.Name, Source: SourceCRD, Kind: cloudprovider.ReservationKind(s.Type),
		NodeGroups: append([]string(nil), s.NodeGroups...), InstanceType: s.InstanceType,
		Count: int(s.Count), Name: cr.Name, UID: cr.UID}
	if r.Kind == "" {
		r.Kind = cloudprovider.ReservationTargeted
	}
	if s.Start != nil {
		r.Start = s.Start.Time
	}
	if s.End != nil {
		r.End = s.End.Time
	}
	if s.PricePerNodeHour != nil {
		r.Price, r.HasPrice = s.PricePerNodeHour.AsApproximateFloat64(), true
	}
	return r
}
