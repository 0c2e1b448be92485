// Package reservations is the autoscaler's model of capacity that is
// already paid for: the cloud provider's reservations and the cluster's
// CapacityReservation objects merged into one list, each with ONE counter
// that every node group drawing on it shares. Each loop it counts what every
// reservation holds (registered nodes, booting ones, and launches of earlier
// loops the provider does not show yet), tells the planner how many nodes a
// group may still add on reserved capacity, cordons and drains the nodes of
// capacity blocks about to end, and tells scale-down which nodes are paid
// for.
package reservations

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Origin says where a reservation was declared.
type Origin string

const (
	SourceProvider Origin = "provider"
	SourceCRD      Origin = "crd"
)

// Capacity types, as node groups declare them in the LabelCapacityType
// label of their nodes (and templates).
const (
	CapacityReserved = "reserved"
	CapacityOnDemand = "on-demand"
	CapacitySpot     = "spot"
)

const (
	// LabelCapacityType says how a node is bought; the kwok provider sets
	// it from the group's capacityType. A group whose nodes say "reserved"
	// launches only onto reservations.
	LabelCapacityType = "autoscaling.dra-autoscaler.io/capacity-type"
	// LabelReservation, when a provider sets it on a node, pins the node
	// to that reservation; other nodes are assigned oldest first.
	LabelReservation = "autoscaling.dra-autoscaler.io/reservation"
	// AnnotationExpectedRuntime is how long a pod declares it will run
	// (a Go duration, "2h"); capacity blocks about to end serve only pods
	// that finish before the end.
	AnnotationExpectedRuntime = "autoscaling.dra-autoscaler.io/expected-runtime"
)

// Reservation is one reservation from either source.
type Reservation struct {
	ID     string
	Origin Origin
	Kind   cloudprovider.ReservationKind
	// NodeGroups are the groups it serves by name; InstanceType serves
	// the groups whose template carries that instance type (not for
	// Targeted reservations, which serve only the groups named).
	NodeGroups   []string
	InstanceType string
	Count        int
	// ReportedInUse is what the provider counts (0 for CRD reservations).
	ReportedInUse int
	// Start and End bound the window; zero means unbounded.
	Start, End time.Time
	// Price per node-hour; HasPrice false means already paid (0).
	Price    float64
	HasPrice bool
	// Name and UID of the CapacityReservation object (CRD source only).
	Name string
	UID  types.UID
}

// Started: not before its start.
func (r *Reservation) Started(now time.Time) bool {
	return r.Start.IsZero() || !now.Before(r.Start)
}

// Ended: at or past its end.
func (r *Reservation) Ended(now time.Time) bool {
	return !r.End.IsZero() && !now.Before(r.End)
}

// Active: inside its window.
func (r *Reservation) Active(now time.Time) bool { return r.Started(now) && !r.Ended(now) }

// IsBlock: a capacity block, whose instances the provider takes back at
// its end. Open and Targeted reservations only stop discounting theirs.
func (r *Reservation) IsBlock() bool { return r.Kind == cloudprovider.ReservationCapacityBlock }

// Ending: a capacity block that ends within margin (or has ended): its
// nodes are drained and it serves only pods that declare they finish
// before the end. Another kind is never ending: at its end its nodes
// keep running, on demand, so nothing needs to move.
func (r *Reservation) Ending(now time.Time, margin time.Duration) bool {
	return r.IsBlock() && !r.End.IsZero() && !now.Before(r.End.Add(-margin))
}

// Serves tells whether the reservation serves a group whose nodes look
// like template.
func (r *Reservation) Serves(group string, template *corev1.Node) bool {
	if slices.Contains(r.NodeGroups, group) {
		return true
	}
	if r.InstanceType == "" || r.Kind == cloudprovider.ReservationTargeted || template == nil {
		return false
	}
	return template.Labels[corev1.LabelInstanceTypeStable] == r.InstanceType
}

// servesPod tells whether new nodes on the reservation may serve a pod:
// always, except on a block ending within margin, which serves only pods
// declaring a run that ends before it does. A pod that declares nothing
// may run forever.
func (r *Reservation) servesPod(pod *corev1.Pod, now time.Time, margin time.Duration) bool {
	if !r.Ending(now, margin) {
		return true
	}
	d, ok := ExpectedRuntime(pod)
	return ok && !now.Add(d).After(r.End)
}

func (r *Reservation) String() string {
	return fmt.Sprintf("%s reservation %s (%s)", r.Origin, r.ID, r.Kind)
}

// FromProvider converts the provider's reservations.
func FromProvider(in []cloudprovider.ReservedCapacity) []*Reservation {
	out := make([]*Reservation, 0, len(in))
	for _, r := range in {
		out = append(out, &Reservation{ID: r.ID, Origin: SourceProvider, Kind: r.Kind,
			NodeGroups: append([]string(nil), r.NodeGroups...), Count: r.Count, ReportedInUse: r.InUse,
			Start: r.Start, End: r.End, Price: r.Price, HasPrice: r.Price > 0})
	}
	return out
}

// ExpectedRuntime is the run time a pod declares, if it declares a valid one.
func ExpectedRuntime(pod *corev1.Pod) (time.Duration, bool) {
	d, err := ParseExpectedRuntime(pod)
	return d, err == nil && d >= 0
}

// ParseExpectedRuntime reads the annotation: -1 and no error when the pod
// has none, an error naming the value when it is malformed (the pod then
// counts as declaring nothing, and is told so).
func ParseExpectedRuntime(pod *corev1.Pod) (time.Duration, error) {
	v, ok := pod.Annotations[AnnotationExpectedRuntime]
	if !ok {
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return -1, fmt.Errorf("annotation %s=%q is not a non-negative duration such as \"2h\"; the pod counts as declaring no run time", AnnotationExpectedRuntime, truncate(v, 64))
	}
	return d, nil
}

// truncate keeps messages short whatever a user put in an annotation.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
