package loop

import (
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
)

// reservationSection is the status's reservations from this loop's book:
// both sources (provider and CapacityReservation objects), counted as the
// planner counts them (booting nodes and requests in flight included).
func reservationSection(b *reservations.Book) []status.ReservationStatus {
	slots := b.Slots()
	out := make([]status.ReservationStatus, 0, len(slots))
	for _, s := range slots {
		r := cloudprovider.ReservedCapacity{ID: s.ID, Kind: s.Kind, NodeGroups: s.NodeGroups, Count: s.Count, InUse: s.InUse,
			Start: s.Start, End: s.End}
		out = append(out, status.ReservationsFrom([]cloudprovider.ReservedCapacity{r}, string(s.Source))...)
	}
	return out
}

// scaleDownSection is the status's scale-down part: the nodes the last
// scale-down pass found unneeded, in total and per group.
func scaleDownSection(res *scaledown.PassResult, groupOf func(node string) string) status.ScaleDownInput {
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
