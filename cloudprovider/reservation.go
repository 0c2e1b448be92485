package cloudprovider

import "time"

// ReservationKind says how a reservation's capacity can be used.
type ReservationKind string

const (
	// ReservationOpen capacity is used by any matching instance.
	ReservationOpen ReservationKind = "Open"
	// ReservationTargeted capacity is used only by instances that name it.
	ReservationTargeted ReservationKind = "Targeted"
	// ReservationCapacityBlock is capacity bought for a fixed window:
	// unusable before Start, reclaimed at End.
	ReservationCapacityBlock ReservationKind = "CapacityBlock"
)

// ReservedCapacity is capacity that is already paid for. Several node groups may
// draw on one reservation; they share its count.
type ReservedCapacity struct {
	ID   string
	Kind ReservationKind
	// NodeGroups are the ids of the groups whose nodes land on it.
	NodeGroups []string
	// Count is the number of instances reserved; InUse how many are taken,
	// booting instances included.
	Count, InUse int
	// Start and End bound a capacity block; zero means unbounded.
	Start, End time.Time
	// Price per node-hour while in use (0 when unknown).
	Price float64
}

// ReservationNamer is an optional NodeGroup method, for providers whose
// groups name the CapacityReservation object their nodes land on (the
// Cluster API provider: a label on the MachineDeployment) instead of
// reporting reservations themselves. The object then serves the group
// whatever its spec.nodeGroups say, and the group launches only onto it
// unless its nodes declare another capacity type.
type ReservationNamer interface {
	// CapacityReservation is the name of the object, "" for none.
	CapacityReservation() string
}
