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
}

// DefaultProvisioningRequestOptions are upstream's behaviour, on.
func DefaultProvisioningRequestOptions() ProvisioningRequestOptions {
	return ProvisioningRequestOptions{Enabled: true, BookingDuration: 10 * time.Minute}
}

func (o *ProvisioningRequestOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "enable-provisioning-requests", o.Enabled,
		"Serve ProvisioningRequests (classes check-capacity and best-effort-atomic-scale-up) when the cluster serves autoscaling.x-k8s.io/v1.")
	fs.DurationVar(&o.BookingDuration, "provisioning-request-booking-duration", o.BookingDuration,
		"How long capacity stays booked for a Provisioned ProvisioningRequest before BookingExpired, unless its pods consume it first.")
}

func (o *ProvisioningRequestOptions) validate() error {
	if o.BookingDuration <= 0 {
		return fmt.Errorf("--provisioning-request-booking-duration=%s: must be positive", o.BookingDuration)
	}
	return nil
}
