package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReservationType says how a reservation's capacity can be used; the values
// are those of cloudprovider.ReservationKind.
// +kubebuilder:validation:Enum=Open;Targeted;CapacityBlock
type ReservationType string

const (
	// TypeOpen capacity is used by any matching node group.
	TypeOpen ReservationType = "Open"
	// TypeTargeted capacity is used only by the node groups it names.
	TypeTargeted ReservationType = "Targeted"
	// TypeCapacityBlock is capacity bought for a window: unusable before
	// start, reclaimed at end.
	TypeCapacityBlock ReservationType = "CapacityBlock"
)

// CapacityReservation is capacity that is already paid for: a number of
// nodes of some node groups (or of an instance type), maybe only within a
// time window. The autoscaler launches on it before anything else and
// writes back how much of it is used.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=capres
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.spec.count`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.used`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="Start",type=date,JSONPath=`.spec.start`
// +kubebuilder:printcolumn:name="End",type=date,JSONPath=`.spec.end`
type CapacityReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CapacityReservationSpec   `json:"spec"`
	Status CapacityReservationStatus `json:"status,omitempty"`
}

// CapacityReservationSpec is what was bought.
//
// +kubebuilder:validation:XValidation:rule="!has(self.start) || !has(self.end) || self.end > self.start",message="end must be after start"
// +kubebuilder:validation:XValidation:rule="self.type != 'CapacityBlock' || (has(self.start) && has(self.end))",message="a CapacityBlock needs both start and end"
type CapacityReservationSpec struct {
	// Type is Open (any matching group), Targeted (only the named groups)
	// or CapacityBlock (a window with a start and an end).
	// +kubebuilder:default=Targeted
	// +optional
	Type ReservationType `json:"type,omitempty"`
	// NodeGroups are the ids of the node groups whose nodes land on it.
	// A group may also name the reservation itself (the Cluster API
	// provider: the label autoscaling.dra-autoscaler.io/capacity-reservation
	// on a MachineDeployment, MachineSet or MachinePool); a reservation
	// that names no group and no instance type serves only those.
	// +optional
	// +listType=set
	NodeGroups []string `json:"nodeGroups,omitempty"`
	// InstanceType matches node groups whose nodes carry
	// node.kubernetes.io/instance-type with this value (Open and
	// CapacityBlock reservations).
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// Count is the number of nodes reserved.
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
	// Start is when the capacity becomes usable; unset means now.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`
	// End is when the capacity is reclaimed; unset means never.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
	// PricePerNodeHour is what a node on it costs per hour, for
	// comparisons with on-demand and spot prices; unset means already paid.
	// +optional
	PricePerNodeHour *resource.Quantity `json:"pricePerNodeHour,omitempty"`
}

// CapacityReservationStatus is what the autoscaler saw in its last loop.
type CapacityReservationStatus struct {
	// Used is how many nodes are on the reservation, booting ones and
	// requests in flight included.
	// +optional
	Used int32 `json:"used"`
	// Available is how many more nodes may launch on it now.
	// +optional
	Available int32 `json:"available"`
	// Conditions: Valid (the autoscaler accepts the spec) and Active
	// (inside its time window).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CapacityReservationList is a list of CapacityReservations.
//
// +kubebuilder:object:root=true
type CapacityReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityReservation `json:"items"`
}
