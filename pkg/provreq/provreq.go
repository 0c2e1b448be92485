// Package provreq serves ProvisioningRequests (autoscaling.x-k8s.io/v1),
// the API Kueue's ProvisioningRequest admission check talks to: a request
// asks for capacity for a set of pods (podSets: PodTemplate × count) at
// once, before any of the pods exist.
//
// Two classes are ours; requests of any other class belong to another
// controller and are left alone:
//   - check-capacity.autoscaling.x-k8s.io: answered from the simulation
//     alone (existing nodes and nodes already requested), never scaling;
//   - best-effort-atomic-scale-up.autoscaling.x-k8s.io: the request's pods
//     are planned as one gang (plan.PlanGangs) and the scale-up is made
//     all or nothing (act.Actuator with atomic parts).
//
// Once a request is Provisioned, its capacity is booked: every loop its
// pods not yet running are placed in the snapshot before anything else,
// so other pods are not planned onto it, until the pods that consume it
// (annotated with the request's name) are bound or the booking window
// (--provisioning-request-booking-duration) ends with BookingExpired.
package provreq

import (
	"time"

	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/discovery"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
)

// Condition reasons and messages, upstream's
// (cluster-autoscaler/provisioningrequest/conditions).
const (
	ReasonAccepted                       = "Accepted"
	MessageAccepted                      = "ProvisioningRequest is accepted by ClusterAutoscaler"
	ReasonCapacityIsFound                = "CapacityIsFound"
	MessageCapacityIsFound               = "Capacity is found in the cluster"
	ReasonCapacityIsNotFound             = "CapacityIsNotFound"
	ReasonCapacityIsProvisioned          = "CapacityIsProvisioned"
	ReasonFailedToCheckCapacity          = "FailedToCheckCapacity"
	ReasonFailedToCreatePods             = "FailedToCreatePods"
	ReasonCapacityReservationTimeExpired = "CapacityReservationTimeExpired"
	MessageCapacityReservationExpired    = "Capacity reservation time is expired"
	ReasonExpired                        = "Expired"
	MessageExpired                       = "ProvisioningRequest is expired"
)

// ReasonTooManyPods is ours (Failed, and its Warning event): the request
// asks for more pods than --max-pods-per-provisioning-request.
const ReasonTooManyPods = "TooManyPods"

// Expiration is how long a request may stay unprovisioned before it is
// Failed (upstream's defaultExpirationTime).
const Expiration = 7 * 24 * time.Hour

// DeprecatedConsumeAnnotation is upstream's older annotation naming the
// request a pod consumes; still honoured.
const DeprecatedConsumeAnnotation = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"

// Kind is the request's kind, for events and owner references.
const Kind = "ProvisioningRequest"

// Options configure the processor.
type Options struct {
	// BookingDuration is how long a Provisioned request's capacity is held.
	BookingDuration time.Duration
	// TemplateGrace is how long a request may name a PodTemplate that does
	// not exist before it is Failed: Kueue creates the templates right
	// after the request (they are owned by it).
	TemplateGrace time.Duration
	// MaxPods bounds the pods of one request (0: the flag's default).
	MaxPods int
}

// DefaultTemplateGrace is the grace for missing PodTemplates.
const DefaultTemplateGrace = 10 * time.Second

// Served tells whether the cluster serves autoscaling.x-k8s.io/v1
// provisioningrequests (the CRD is installed).
func Served(d discovery.DiscoveryInterface) (bool, error) {
	return observe.ResourceServed(d, v1.SchemeGroupVersion.String(), "provisioningrequests")
}

// ours tells whether the class is one this autoscaler serves.
func ours(class string) bool {
	return class == v1.ProvisioningClassCheckCapacity || class == v1.ProvisioningClassBestEffortAtomicScaleUp
}
