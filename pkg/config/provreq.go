package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// ProvisioningRequestOptions configure the ProvisioningRequest
// (autoscaling.x-k8s.io/v1) classes the autoscaler serves.
type ProvisioningRequestOptions struct {
	// Enabled serves ProvisioningRequests when the cluster has the CRD.
	Enabled bool
	// BookingDuration is how long capacity stays held for a request once
	// it is Provisioned, unless its pods consume it earlier (upstream
	// hard-codes 10 minutes).
	BookingDuration time.Duration
	// MaxPods bounds the pods one request may ask for (the sum of its
	// podSets' counts); a larger request is Failed before any of its pods
	// is built, so a tenant's request cannot take the autoscaler's memory.
	MaxPods int
}

// DefaultMaxPodsPerProvisioningRequest is the default of
// --max-pods-per-provisioning-request: upstream's bound on the fake pods
// it injects (--pod-injection-limit). A simulated pod costs about 10 KB
// (its object and the scheduler's PodInfo), so a request at the bound
// takes about 50 MB for one pass, while a gang of thousands of GPUs (8 per
// pod) stays far below it.
const DefaultMaxPodsPerProvisioningRequest = 5000

// DefaultProvisioningRequestOptions are upstream's behaviour, on.
func DefaultProvisioningRequestOptions() ProvisioningRequestOptions {
	return ProvisioningRequestOptions{Enabled: true, BookingDuration: 10 * time.Minute, MaxPods: DefaultMaxPodsPerProvisioningRequest}
}

func (o *ProvisioningRequestOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "enable-provisioning-requests", o.Enabled,
		"Serve ProvisioningRequests (classes check-capacity and best-effort-atomic-scale-up) when the cluster serves autoscaling.x-k8s.io/v1.")
	fs.DurationVar(&o.BookingDuration, "provisioning-request-booking-duration", o.BookingDuration,
		"How long capacity stays booked for a Provisioned ProvisioningRequest before BookingExpired, unless its pods consume it first.")
	fs.IntVar(&o.MaxPods, "max-pods-per-provisioning-request", o.MaxPods,
		"Most pods one ProvisioningRequest may ask for (the sum of its podSets' counts). A larger request is Failed (reason TooManyPods) "+
			"before any of its pods is simulated, so one tenant's request cannot exhaust the autoscaler's memory. The default is upstream's "+
			"--pod-injection-limit: about 50 MB of simulated pods, far above the largest GPU gang.")
}

func (o *ProvisioningRequestOptions) validate() error {
	if o.BookingDuration <= 0 {
		return fmt.Errorf("--provisioning-request-booking-duration=%s: must be positive", o.BookingDuration)
	}
	if o.MaxPods <= 0 {
		return fmt.Errorf("--max-pods-per-provisioning-request=%d: must be positive", o.MaxPods)
	}
	return nil
}
