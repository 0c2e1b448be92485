package config

import (
	"fmt"

	"github.com/spf13/pflag"
)

// HealthOptions say when too many nodes are unready for the autoscaler
// to act (upstream's flags and rule): unhealthy when more than
// OkTotalUnreadyCount nodes are unready and also more than
// MaxTotalUnreadyPercentage of all nodes.
type HealthOptions struct {
	MaxTotalUnreadyPercentage float64
	OkTotalUnreadyCount       int
}

// DefaultHealth returns upstream's defaults.
func DefaultHealth() HealthOptions {
	return HealthOptions{MaxTotalUnreadyPercentage: 45, OkTotalUnreadyCount: 3}
}

func (o *HealthOptions) addFlags(fs *pflag.FlagSet) {
	fs.Float64Var(&o.MaxTotalUnreadyPercentage, "max-total-unready-percentage", o.MaxTotalUnreadyPercentage, "Maximum percentage of unready nodes in the cluster; above it (and above --ok-total-unready-count) the autoscaler neither scales up nor down.")
	fs.IntVar(&o.OkTotalUnreadyCount, "ok-total-unready-count", o.OkTotalUnreadyCount, "Number of unready nodes allowed whatever --max-total-unready-percentage says.")
}

func (o *HealthOptions) validate() []error {
	var errs []error
	if p := o.MaxTotalUnreadyPercentage; p < 0 || p > 100 {
		errs = append(errs, fmt.Errorf("--max-total-unready-percentage=%v: must be between 0 and 100", p))
	}
	if o.OkTotalUnreadyCount < 0 {
		errs = append(errs, fmt.Errorf("--ok-total-unready-count=%d: must not be negative", o.OkTotalUnreadyCount))
	}
	return errs
}
