// Package status writes the autoscaler's status ConfigMap
// (cluster-autoscaler-status, key "status"): upstream's layout
// (autoscalerStatus, clusterWide health/scaleUp/scaleDown, nodeGroups with
// health, target and backoff), so tools reading upstream's status keep
// working, plus sections of our own: gangs, reservations, the DRA pools of
// each group's template, the pods no scale-up helped and why, and the pods
// the scheduler and the simulation disagree on.
package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AutoscalerStatus is the document stored under the "status" key.
type AutoscalerStatus struct {
	Time             metav1.Time    `json:"time"`
	AutoscalerStatus string         `json:"autoscalerStatus"`
	Message          string         `json:"message,omitempty"`
	ClusterWide      ClusterWide    `json:"clusterWide"`
	NodeGroups       []GroupSection `json:"nodeGroups"`

	// Ours.
	// CloudProviderInsecure says why the connection to the cloud provider
	// is neither authenticated nor encrypted (externalgrpc with
	// `insecure: true`); empty when it is secure.
	CloudProviderInsecure  string               `json:"cloudProviderInsecure,omitempty"`
	Gangs                  []GangStatus         `json:"gangs,omitempty"`
	Reservations           []ReservationStatus  `json:"reservations,omitempty"`
	PodsNotHelped          []PodNotHelped       `json:"podsNotHelped,omitempty"`
	PodsNotHelpedTotal     int                  `json:"podsNotHelpedTotal,omitempty"`
	SchedulerDisagreements []DisagreementStatus `json:"schedulerDisagreements,omitempty"`
	// HeldBack are the destructive actions the safety gate refused in
	// the pass (at most MaxHeldBack; HeldBackTotal counts them all).
	HeldBack      []HeldBackStatus `json:"heldBack,omitempty"`
	HeldBackTotal int              `json:"heldBackTotal,omitempty"`
}

// MaxHeldBack bounds the refusals listed in the status.
const MaxHeldBack = 100

// HeldBackStatus is one destructive action the safety gate refused:
// which, of what, by which rule and why (docs/design/safety.md).
type HeldBackStatus struct {
	Action    string `json:"action"`
	Rule      string `json:"rule"`
	NodeGroup string `json:"nodeGroup,omitempty"`
	Node      string `json:"node,omitempty"`
	Message   string `json:"message"`
}

// ClusterWide is upstream's clusterWide section.
type ClusterWide struct {
	Health    Health          `json:"health"`
	ScaleUp   ScaleUpStatus   `json:"scaleUp"`
	ScaleDown ScaleDownStatus `json:"scaleDown"`
}

// Health statuses, upstream's.
const (
	HealthHealthy   = "Healthy"
	HealthUnhealthy = "Unhealthy"
)

// Health says whether the cluster or group can be autoscaled.
type Health struct {
	Status              string      `json:"status"`
	NodeCounts          NodeCounts  `json:"nodeCounts"`
	CloudProviderTarget *int        `json:"cloudProviderTarget,omitempty"`
	MinSize             *int        `json:"minSize,omitempty"`
	MaxSize             *int        `json:"maxSize,omitempty"`
	LastProbeTime       metav1.Time `json:"lastProbeTime"`
	LastTransitionTime  metav1.Time `json:"lastTransitionTime"`
}

// NodeCounts are upstream's node counts.
type NodeCounts struct {
	Registered   RegisteredNodes `json:"registered"`
	Unregistered int             `json:"unregistered"`
}

// RegisteredNodes counts registered nodes by state.
type RegisteredNodes struct {
	Total      int `json:"total"`
	Ready      int `json:"ready"`
	NotStarted int `json:"notStarted"`
	Unready    int `json:"unready"`
}

// Scale-up statuses, upstream's.
const (
	ScaleUpNoActivity = "NoActivity"
	ScaleUpInProgress = "InProgress"
	ScaleUpBackoff    = "Backoff"
	ScaleUpNeeded     = "NeedsScaleUp"
)

// ScaleUpStatus says whether nodes are coming.
type ScaleUpStatus struct {
	Status             string       `json:"status"`
	BackoffInfo        *BackoffInfo `json:"backoffInfo,omitempty"`
	LastProbeTime      metav1.Time  `json:"lastProbeTime"`
	LastTransitionTime metav1.Time  `json:"lastTransitionTime"`
}

// BackoffInfo is why and until when a group is backed off.
type BackoffInfo struct {
	ErrorCode    string      `json:"errorCode"`
	ErrorMessage string      `json:"errorMessage"`
	Until        metav1.Time `json:"until"`
	Failures     int         `json:"failures,omitempty"`
}

// Scale-down statuses, upstream's.
const (
	ScaleDownNoCandidates      = "NoCandidates"
	ScaleDownCandidatesPresent = "CandidatesPresent"
)

// ScaleDownStatus says whether nodes are candidates for removal.
type ScaleDownStatus struct {
	Status             string      `json:"status"`
	Candidates         int         `json:"candidates,omitempty"`
	LastProbeTime      metav1.Time `json:"lastProbeTime"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
}

// GroupSection is one group's entry.
type GroupSection struct {
	Name      string          `json:"name"`
	Health    Health          `json:"health"`
	ScaleUp   ScaleUpStatus   `json:"scaleUp"`
	ScaleDown ScaleDownStatus `json:"scaleDown"`
	// Ours: where the template came from and the DRA pools a new node
	// of the group would bring.
	TemplateSource string `json:"templateSource,omitempty"`
	// TemplateSkipped are the registered nodes not used as the template,
	// and why ("node/<name>: driver d: pool p has 1 of 3 slices").
	TemplateSkipped []string  `json:"templateSkipped,omitempty"`
	TemplateError   string    `json:"templateError,omitempty"`
	DRAPools        []DRAPool `json:"draPools,omitempty"`
	// Options are the values the group runs with: its provider's own
	// (per-group options) or the flags'.
	Options *GroupOptions `json:"options,omitempty"`
}

// GroupOptions are a group's autoscaling options and where they come
// from ("provider" or "flags").
type GroupOptions struct {
	From                             string          `json:"from"`
	ScaleDownUtilizationThreshold    float64         `json:"scaleDownUtilizationThreshold"`
	ScaleDownGpuUtilizationThreshold float64         `json:"scaleDownGpuUtilizationThreshold"`
	ScaleDownUnneededTime            metav1.Duration `json:"scaleDownUnneededTime"`
	ScaleDownUnreadyTime             metav1.Duration `json:"scaleDownUnreadyTime"`
	MaxNodeProvisionTime             metav1.Duration `json:"maxNodeProvisionTime"`
	ZeroOrMaxNodeScaling             bool            `json:"zeroOrMaxNodeScaling,omitempty"`
}

// DRAPool is one resource pool of a group's template node.
type DRAPool struct {
	Driver   string            `json:"driver"`
	Pool     string            `json:"pool"`
	Devices  int               `json:"devices"`
	Counters map[string]string `json:"counters,omitempty"`
}

// GangStatus is one gang the planner looked at.
type GangStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Pods      int    `json:"pods"`
	Planned   string `json:"planned,omitempty"`
	Message   string `json:"message,omitempty"`
}

// ReservationStatus is one capacity reservation and how much of it is used.
type ReservationStatus struct {
	ID         string       `json:"id"`
	Kind       string       `json:"kind"`
	Source     string       `json:"source,omitempty"`
	NodeGroups []string     `json:"nodeGroups,omitempty"`
	Count      int          `json:"count"`
	InUse      int          `json:"inUse"`
	Start      *metav1.Time `json:"start,omitempty"`
	End        *metav1.Time `json:"end,omitempty"`
}

// PodNotHelped is a pending pod no scale-up helps, with every group's
// reason.
type PodNotHelped struct {
	Namespace string              `json:"namespace"`
	Name      string              `json:"name"`
	Reasons   []GroupReasonStatus `json:"reasons,omitempty"`
}

// GroupReasonStatus is why one group cannot help a pod.
type GroupReasonStatus struct {
	NodeGroup  string `json:"nodeGroup"`
	Reason     string `json:"reason"`
	Message    string `json:"message,omitempty"`
	Constraint string `json:"constraint,omitempty"`
}

// DisagreementStatus is a pod the simulation places but the scheduler does not.
type DisagreementStatus struct {
	Namespace        string      `json:"namespace"`
	Name             string      `json:"name"`
	Node             string      `json:"node"`
	Since            metav1.Time `json:"since"`
	SchedulerMessage string      `json:"schedulerMessage,omitempty"`
	// NodeNotUsable says why Node, registered, cannot take pods yet.
	NodeNotUsable string `json:"nodeNotUsable,omitempty"`
}
