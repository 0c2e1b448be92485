package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// NominationOptions configure nominating planned nodes: telling the
// scheduler, through pods' status.nominatedNodeName, where the plan put
// them (pkg/scaleup/nominate).
type NominationOptions struct {
	// Enabled nominates pods for the nodes the plan placed them on.
	Enabled bool
	// Timeout is how long a nomination may stand on a usable node
	// without the scheduler binding the pod there; then it is cleared.
	Timeout time.Duration
}

// DefaultNominations are on, with a minute's timeout.
func DefaultNominations() NominationOptions {
	return NominationOptions{Enabled: true, Timeout: time.Minute}
}

func (o *NominationOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "nominate-planned-nodes", o.Enabled,
		"Set status.nominatedNodeName on pending pods for the nodes the plan placed them on (new nodes once they register, existing usable nodes), so that the scheduler tries those nodes first (KEP-5278). Only nominations the autoscaler set are ever cleared.")
	fs.DurationVar(&o.Timeout, "nomination-timeout", o.Timeout,
		"How long a nomination may stand on a usable node without the scheduler binding the pod there; then the autoscaler clears it (if it still names that node) and counts it as ignored.")
}

func (o *NominationOptions) validate() error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--nomination-timeout=%s: must be positive", o.Timeout)
	}
	return nil
}
