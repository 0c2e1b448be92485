package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// ReservationOptions configure the use of capacity reservations.
type ReservationOptions struct {
	// EndMargin: a capacity block ending within it serves only pods that
	// declare they finish before its end, and its nodes are drained.
	EndMargin time.Duration
	// ScaleDownReservedNodes lets scale-down remove idle nodes on
	// reservations (paid for anyway, so kept by default).
	ScaleDownReservedNodes bool
}

func defaultReservationOptions() ReservationOptions {
	return ReservationOptions{EndMargin: 30 * time.Minute}
}

func (o *ReservationOptions) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.EndMargin, "reservation-end-margin", o.EndMargin, "A capacity block ending within this margin serves only pods whose autoscaling.dra-autoscaler.io/expected-runtime ends before it does; its nodes are cordoned and drained.")
	fs.BoolVar(&o.ScaleDownReservedNodes, "scale-down-reserved-nodes", o.ScaleDownReservedNodes, "Let scale-down remove idle nodes on active capacity reservations.")
}

func (o *ReservationOptions) validate() []error {
	if o.EndMargin < 0 {
		return []error{fmt.Errorf("--reservation-end-margin=%s: must not be negative", o.EndMargin)}
	}
	return nil
}
