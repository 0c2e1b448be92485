package objects

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
)

// What else than pkg/limits' reasons can stop a group, as
// status.provisionable.limitedBy says it. The planner's reasons
// (pkg/scaleup/plan) where it has them.
const (
	LimitedByReservation = "reservation"
	LimitedByBackoff     = "backoff"
	LimitedByNoTemplate  = "no-template"
	LimitedByFromZero    = "scale-up-from-zero-disabled"
	LimitedByUnhealthy   = "cluster-unhealthy"
)

// GroupLimits is everything that caps one group's growth in a pass, as
// the planner applies it (pkg/scaleup/plan's gate and reservations).
type GroupLimits struct {
	// Size is the group's size for limits after this pass's scale-ups;
	// Max its maximum.
	Size, Max int
	// NoTemplate says why the group has no template ("" when it has).
	NoTemplate string
	// Backoff is the group's backoff, if it is backed off now.
	Backoff   backoff.Entry
	BackedOff bool
	// FromZeroDisabled: the group is empty and --scale-up-from-zero is off.
	FromZeroDisabled bool
	// Unsafe says why the cluster is too unhealthy to scale ("" when not).
	Unsafe string
	// ClusterRoom is how many nodes like the group's template the
	// cluster-wide limits leave (limits.Limiter.MaxNewNodes), ClusterLimit
	// the limit that binds ("" when none binds before the group's max).
	ClusterRoom  int
	ClusterLimit string
	// ReservedOnly: the group launches only onto reservations, which have
	// ReservationLeft nodes left for it.
	ReservedOnly    bool
	ReservationLeft int
	// PerNode are the devices of each class one new node brings.
	PerNode map[string]int
}

// capLimit is one cap on a group's growth.
type capLimit struct {
	nodes   int
	reason  string
	message string
}

// Provisionable is how many more nodes (and devices of each class) the
// group can add now, and the limit that stops it: the tightest cap, the
// first of equal ones in the planner's order (what keeps the group out
// entirely, then its max size, the cluster-wide limits, its reservations).
func Provisionable(l GroupLimits) v1alpha1.Provisionable {
	best := capLimit{nodes: -1}
	for _, c := range caps(l) {
		if best.nodes < 0 || c.nodes < best.nodes {
			best = c
		}
	}
	out := v1alpha1.Provisionable{Nodes: int32(max(best.nodes, 0)), LimitedBy: best.reason, Message: best.message}
	names := make([]string, 0, len(l.PerNode))
	for name, n := range l.PerNode {
		if n > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		out.DeviceClasses = append(out.DeviceClasses, v1alpha1.ClassDevices{Name: name, Devices: out.Nodes * int32(l.PerNode[name])})
	}
	return out
}

func caps(l GroupLimits) []capLimit {
	var out []capLimit
	switch {
	case l.NoTemplate != "":
		out = append(out, capLimit{0, LimitedByNoTemplate, l.NoTemplate})
	case l.BackedOff:
		out = append(out, capLimit{0, LimitedByBackoff, fmt.Sprintf("backed off until %s after %s (%d failure(s) in a row)",
			l.Backoff.Until.UTC().Format(time.RFC3339), l.Backoff.Reason, l.Backoff.Failures)})
	case l.Unsafe != "":
		out = append(out, capLimit{0, LimitedByUnhealthy, l.Unsafe})
	case l.FromZeroDisabled:
		out = append(out, capLimit{0, LimitedByFromZero, "the group has no nodes and --scale-up-from-zero is off"})
	}
	out = append(out, capLimit{l.Max - l.Size, limits.ReasonGroupMax, fmt.Sprintf("node group at %d of max %d", l.Size, l.Max)})
	if l.ClusterLimit != "" {
		out = append(out, capLimit{l.ClusterRoom, l.ClusterLimit, fmt.Sprintf("the cluster-wide %s limit leaves room for %d node(s) like this group's", l.ClusterLimit, max(l.ClusterRoom, 0))})
	}
	if l.ReservedOnly {
		out = append(out, capLimit{l.ReservationLeft, LimitedByReservation, fmt.Sprintf("the group launches only onto reservations, which have %d node(s) left for it", l.ReservationLeft)})
	}
	return out
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds, 0
// for none; ds is not modified.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	// Nearest rank: the smallest value with at least p% of the values at
	// or below it.
	rank := int(math.Ceil(float64(len(s))*p/100 - 1e-9))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}
