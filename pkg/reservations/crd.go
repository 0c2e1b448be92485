package reservations

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
		cr, err := v1alpha1.FromUnstructured(u)
		if err == nil {
			err = cr.Validate()
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

func fromCRD(cr *v1alpha1.CapacityReservation) *Reservation {
	s := cr.Spec
	r := &Reservation{ID: cr.Name, Origin: SourceCRD, Kind: cloudprovider.ReservationKind(s.Type),
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
