package loop

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
)

// reservationSection is the status's reservations from this loop's book:
// both sources (provider and CapacityReservation objects), counted as the
// planner counts them (booting nodes and requests in flight included).
func reservationSection(b *reservations.Book) []status.Reservation {
	slots := b.Slots()
	out := make([]status.Reservation, 0, len(slots))
	for _, s := range slots {
		r := status.Reservation{ID: s.ID, Kind: string(s.Kind), Source: string(s.Source), NodeGroups: s.NodeGroups,
			Count: s.Count, InUse: s.InUse}
		if !s.Start.IsZero() {
			t := metav1.NewTime(s.Start)
			r.Start = &t
		}
		if !s.End.IsZero() {
			t := metav1.NewTime(s.End)
			r.End = &t
		}
		out = append(out, r)
	}
	return out
}

// scaleDownSection is the status's scale-down part: the nodes the last
// scale-down pass found unneeded, in total and per group.
func scaleDownSection(res *scaledown.Result, groupOf func(node string) string) status.ScaleDownInput {
	in := status.ScaleDownInput{PerGroup: map[string]int{}}
	if res == nil || res.Plan == nil {
		return in
	}
	for _, n := range res.Plan.Unneeded {
		in.Candidates++
		if g := groupOf(n); g != "" {
			in.PerGroup[g]++
		}
	}
	return in
}
