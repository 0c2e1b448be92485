package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeGroup is one node group the autoscaler manages, as it saw it in its
// last pass: sizes, nodes, what a new node brings (allocatable and DRA
// devices), reservations, backoff, how long new nodes took to become
// usable, and how much more can be provisioned now. The autoscaler's
// leader creates, updates and deletes these objects; they are read-only
// for users (a queue, a scheduler plugin, a dashboard reads them).
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ng
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Min",type=integer,JSONPath=`.status.minSize`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.status.maxSize`
// +kubebuilder:printcolumn:name="Target",type=integer,JSONPath=`.status.targetSize`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Upcoming",type=integer,JSONPath=`.status.upcomingNodes`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Price",type=string,JSONPath=`.status.pricePerNodeHour`
// +kubebuilder:printcolumn:name="Provisionable",type=integer,JSONPath=`.status.provisionable.nodes`,priority=1
// +kubebuilder:printcolumn:name="Limited-By",type=string,JSONPath=`.status.provisionable.limitedBy`,priority=1
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacityType`,priority=1
// +kubebuilder:printcolumn:name="Ready-P90",type=string,JSONPath=`.status.provisioningTime.p90`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeGroupStatus `json:"status,omitempty"`
}

// Health values of a NodeGroup.
const (
	// NodeGroupHealthy: the group can be scaled up.
	NodeGroupHealthy = "Healthy"
	// NodeGroupBackoff: a scale-up failed; the group is left out of
	// scale-up until status.backoff.until.
	NodeGroupBackoff = "Backoff"
	// NodeGroupNoTemplate: the autoscaler cannot tell what a new node
	// looks like (no healthy node, no template from the provider).
	NodeGroupNoTemplate = "NoTemplate"
)

// NodeGroupStatus is what the autoscaler saw in its last pass. It is
// written only when something in it changed.
type NodeGroupStatus struct {
	// NodeGroup is the cloud provider's id of the group (the object's
	// name is that id made a valid object name).
	NodeGroup string `json:"nodeGroup"`
	// MinSize and MaxSize bound the group's size.
	MinSize int32 `json:"minSize"`
	MaxSize int32 `json:"maxSize"`
	// TargetSize is the provider's target.
	TargetSize int32 `json:"targetSize"`
	// ReadyNodes are registered and usable (Ready, DRA drivers
	// published); BootingNodes are registered but not usable yet;
	// UpcomingNodes are requested and not registered yet.
	ReadyNodes    int32 `json:"readyNodes"`
	BootingNodes  int32 `json:"bootingNodes"`
	UpcomingNodes int32 `json:"upcomingNodes"`
	// Health is Healthy, Backoff or NoTemplate; Message says more when
	// it is not Healthy.
	Health  string `json:"health"`
	Message string `json:"message,omitempty"`
	// PricePerNodeHour is what one more node costs per hour, a decimal
	// in the provider's currency ("2.25"), when the provider has prices.
	// +optional
	PricePerNodeHour string `json:"pricePerNodeHour,omitempty"`
	// CapacityType is how the group's nodes are bought: reserved,
	// on-demand or spot. A reserved group launches only onto
	// reservations.
	CapacityType string `json:"capacityType,omitempty"`
	// ReservationLeft is how many more nodes of the group may launch on
	// the reservations it draws on; unset when none serves it.
	// +optional
	ReservationLeft *int32 `json:"reservationLeft,omitempty"`
	// Template is what one new node of the group brings.
	// +optional
	Template *NodeGroupTemplate `json:"template,omitempty"`
	// Backoff is set while the group is backed off after a failed
	// scale-up.
	// +optional
	Backoff *NodeGroupBackoffStatus `json:"backoff,omitempty"`
	// ProvisioningTime is how long the group's last scale-ups took from
	// the request until the node was usable.
	// +optional
	ProvisioningTime *ProvisioningTime `json:"provisioningTime,omitempty"`
	// Provisionable is how much more can be added now, and what stops it.
	Provisionable Provisionable `json:"provisionable"`
	// UnitSize is how many nodes the group adds and removes at a time
	// when they come in units (racks, NVLink domains); unset: one.
	// +optional
	UnitSize int32 `json:"unitSize,omitempty"`
	// Units are the group's registered units and the room each has left,
	// by domain (at most maxUnits of them, fullest room first).
	// +optional
	// +listType=map
	// +listMapKey=domain
	Units []NodeGroupUnit `json:"units,omitempty"`
}

// NodeGroupUnit is one registered unit of a group whose nodes come in
// units.
type NodeGroupUnit struct {
	// Domain is the unit's values of the labels its provider picks per
	// unit ("label=value,...").
	Domain string `json:"domain"`
	// Nodes are the unit's registered nodes; IdleNodes those of them
	// running no pod but DaemonSet and mirror pods.
	Nodes     int32 `json:"nodes"`
	IdleNodes int32 `json:"idleNodes"`
	// FreeDevices counts, per DRA driver, the devices on the unit's
	// nodes that no claim holds.
	// +optional
	// +listType=map
	// +listMapKey=driver
	FreeDevices []DriverDevices `json:"freeDevices,omitempty"`
}

// NodeGroupTemplate is what one new node of the group brings.
type NodeGroupTemplate struct {
	// Source is where the template came from: "node/<name>" (a healthy
	// node of the group) or "provider".
	Source string `json:"source,omitempty"`
	// Allocatable is the node's allocatable resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Drivers are the DRA drivers publishing devices on the node.
	// +optional
	// +listType=map
	// +listMapKey=driver
	Drivers []DriverDevices `json:"drivers,omitempty"`
	// DeviceClasses are the cluster's DeviceClasses with devices on the
	// node: how many devices of the class one request on a new node can
	// get, as the scheduler's allocator answers (daemon pods' claims
	// already taken).
	// +optional
	// +listType=map
	// +listMapKey=name
	DeviceClasses []ClassDevices `json:"deviceClasses,omitempty"`
}

// DriverDevices counts one driver's devices on a node.
type DriverDevices struct {
	Driver  string `json:"driver"`
	Devices int32  `json:"devices"`
}

// ClassDevices counts devices of one DeviceClass.
type ClassDevices struct {
	Name    string `json:"name"`
	Devices int32  `json:"devices"`
}

// NodeGroupBackoffStatus is why and until when the group is backed off.
type NodeGroupBackoffStatus struct {
	// Reason is the kind of failure: timeout, nodeNotUsable,
	// outOfResources, cloudProviderError.
	Reason string      `json:"reason"`
	Until  metav1.Time `json:"until"`
	// Failures counts failures in a row.
	Failures int32 `json:"failures,omitempty"`
}

// ProvisioningTime summarises the time from scale-up request to usable
// node over the group's last Samples nodes (seen at the autoscaler's
// scan interval).
type ProvisioningTime struct {
	Samples int32           `json:"samples"`
	P50     metav1.Duration `json:"p50"`
	P90     metav1.Duration `json:"p90"`
}

// Provisionable is how many more nodes (and devices of each class) the
// group can add now before something stops it.
type Provisionable struct {
	Nodes int32 `json:"nodes"`
	// LimitedBy names what stops it at Nodes: node-group-max-size,
	// max-nodes-total, cores-total, memory-total, reservation, backoff,
	// no-template, scale-up-from-zero-disabled or cluster-unhealthy.
	LimitedBy string `json:"limitedBy,omitempty"`
	// Message says more about LimitedBy.
	Message string `json:"message,omitempty"`
	// DeviceClasses are Nodes times each class's devices per node.
	// +optional
	// +listType=map
	// +listMapKey=name
	DeviceClasses []ClassDevices `json:"deviceClasses,omitempty"`
}

// NodeGroupList is a list of NodeGroups.
//
// +kubebuilder:object:root=true
type NodeGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeGroup `json:"items"`
}
