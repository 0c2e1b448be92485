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
	// MaxWritesPerPass bounds the pod status writes of one pass.
	MaxWritesPerPass int
}

// DefaultNominations are on, with a minute's timeout and 20 writes a
// pass: about what the default client rate (5 QPS, burst 10) allows in
// the 10 s between passes, where a busy pass may place thousands of pods.
func DefaultNominations() NominationOptions {
	return NominationOptions{Enabled: true, Timeout: time.Minute, MaxWritesPerPass: 20}
}

func (o *NominationOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "nominate-planned-nodes", o.Enabled,
		"Set status.nominatedNodeName on pending pods for the nodes the plan placed them on (new nodes once they register, existing usable nodes), so that the scheduler tries those nodes first (KEP-5278). Only nominations the autoscaler set are ever cleared.")
	fs.DurationVar(&o.Timeout, "nomination-timeout", o.Timeout,
		"How long a nomination may stand on a usable node without the scheduler binding the pod there; then the autoscaler clears it (if it still names that node) and counts it as ignored.")
	fs.IntVar(&o.MaxWritesPerPass, "max-nomination-writes-per-pass", o.MaxWritesPerPass,
		"At most this many pod status writes (nominations set or cleared) per pass, each an API call at --kube-client-qps; clears go first, then nominations for nodes a scale-up added, and the rest wait for later passes. 0: no bound.")
}

func (o *NominationOptions) validate() error {
	if o.Timeout <= 0 {
		return fmt.Errorf("--nomination-timeout=%s: must be positive", o.Timeout)
	}
	if o.MaxWritesPerPass < 0 {
		return fmt.Errorf("--max-nomination-writes-per-pass=%d: must not be negative", o.MaxWritesPerPass)
	}
	return nil
}
