package objects

import (
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
)

func TestProvisionable(t *testing.T) {
	gpus := map[string]int{"gpu": 8, "nic": 8, "none": 0}
	until := time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		in        GroupLimits
		nodes     int32
		limitedBy string
		devices   map[string]int32
	}{
		{"max size binds", GroupLimits{Size: 2, Max: 10, PerNode: gpus}, 8, limits.ReasonGroupMax, map[string]int32{"gpu": 64, "nic": 64}},
		{"at max", GroupLimits{Size: 10, Max: 10, PerNode: gpus}, 0, limits.ReasonGroupMax, map[string]int32{"gpu": 0, "nic": 0}},
		{"above max (shrinking) is none, not negative", GroupLimits{Size: 12, Max: 10}, 0, limits.ReasonGroupMax, nil},
		{"cluster-wide cores bind before the max", GroupLimits{Size: 2, Max: 10, ClusterRoom: 3, ClusterLimit: limits.ReasonCoresTotal, PerNode: gpus},
			3, limits.ReasonCoresTotal, map[string]int32{"gpu": 24, "nic": 24}},
		{"max-nodes-total already passed", GroupLimits{Size: 0, Max: 10, ClusterRoom: -2, ClusterLimit: limits.ReasonMaxNodesTotal}, 0, limits.ReasonMaxNodesTotal, nil},
		{"reservation binds before max and limits", GroupLimits{Size: 1, Max: 10, ClusterRoom: 5, ClusterLimit: limits.ReasonMemoryTotal,
			ReservedOnly: true, ReservationLeft: 2, PerNode: map[string]int{"gpu": 4}}, 2, LimitedByReservation, map[string]int32{"gpu": 8}},
		{"reservation left beyond max: max binds", GroupLimits{Size: 1, Max: 4, ReservedOnly: true, ReservationLeft: 10}, 3, limits.ReasonGroupMax, nil},
		{"reservation left on an on-demand group does not cap", GroupLimits{Size: 1, Max: 4, ReservationLeft: 0}, 3, limits.ReasonGroupMax, nil},
		{"reserved-only with nothing left", GroupLimits{Size: 1, Max: 4, ReservedOnly: true}, 0, LimitedByReservation, nil},
		{"equal caps: the max is named first", GroupLimits{Size: 2, Max: 4, ClusterRoom: 2, ClusterLimit: limits.ReasonMaxNodesTotal, ReservedOnly: true, ReservationLeft: 2},
			2, limits.ReasonGroupMax, nil},
		{"backoff stops all", GroupLimits{Size: 1, Max: 4, BackedOff: true, Backoff: backoff.Entry{Until: until, Reason: "outOfResources", Failures: 1},
			PerNode: gpus}, 0, LimitedByBackoff, map[string]int32{"gpu": 0, "nic": 0}},
		{"backoff before a full group", GroupLimits{Size: 4, Max: 4, BackedOff: true}, 0, LimitedByBackoff, nil},
		{"no template", GroupLimits{Size: 0, Max: 4, NoTemplate: "no healthy node"}, 0, LimitedByNoTemplate, nil},
		{"unhealthy cluster", GroupLimits{Size: 3, Max: 4, Unsafe: "too many unready nodes"}, 0, LimitedByUnhealthy, nil},
		{"empty group without scale-up from zero", GroupLimits{Size: 0, Max: 4, FromZeroDisabled: true}, 0, LimitedByFromZero, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Provisionable(tc.in)
			if got.Nodes != tc.nodes || got.LimitedBy != tc.limitedBy {
				t.Errorf("got %d limited by %q (%s), want %d by %q", got.Nodes, got.LimitedBy, got.Message, tc.nodes, tc.limitedBy)
			}
			if got.Message == "" {
				t.Errorf("no message for %q", got.LimitedBy)
			}
			if len(got.DeviceClasses) != len(tc.devices) {
				t.Fatalf("device classes %+v, want %v", got.DeviceClasses, tc.devices)
			}
			for i, c := range got.DeviceClasses {
				if want, ok := tc.devices[c.Name]; !ok || want != c.Devices {
					t.Errorf("class %s: %d devices, want %v", c.Name, c.Devices, tc.devices)
				}
				if i > 0 && got.DeviceClasses[i-1].Name >= c.Name {
					t.Errorf("classes not sorted: %+v", got.DeviceClasses)
				}
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	s := func(secs ...int) []time.Duration {
		out := make([]time.Duration, len(secs))
		for i, x := range secs {
			out[i] = time.Duration(x) * time.Second
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", s(7), 50, 7 * time.Second},
		{"one p90", s(7), 90, 7 * time.Second},
		{"median of odd, unsorted", s(30, 10, 20), 50, 20 * time.Second},
		{"median of even is the lower middle", s(40, 10, 30, 20), 50, 20 * time.Second},
		{"p90 of ten is the ninth", s(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), 90, 9 * time.Second},
		{"p90 of eleven is the tenth", s(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 100), 90, 10 * time.Second},
		{"p90 of three is the largest", s(5, 1, 3), 90, 5 * time.Second},
		{"p100 is the largest", s(5, 1, 3), 100, 5 * time.Second},
		{"duplicates", s(4, 4, 4, 9), 50, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before []time.Duration
			before = append(before, tc.in...)
			if got := Percentile(tc.in, tc.p); got != tc.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tc.in, tc.p, got, tc.want)
			}
			for i := range before {
				if before[i] != tc.in[i] {
					t.Fatalf("input reordered: %v", tc.in)
				}
			}
		})
	}
}
