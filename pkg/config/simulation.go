package config

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// SimulationOptions configure the simulation's shortcuts and their
// checks against the plain framework (docs/design/caches.md).
type SimulationOptions struct {
	// ShadowFitSamples and ShadowEstimateSamples bound the shadow check
	// of one pass: fit-existing decisions, and estimates (each over the
	// first ShadowEstimatePods pods of its order).
	ShadowFitSamples, ShadowEstimateSamples, ShadowEstimatePods int
	// DisableShortcutOnMismatch turns a shortcut off for the rest of the
	// process once the shadow check found it wrong.
	DisableShortcutOnMismatch bool
	// DisabledShortcuts are off from the start.
	DisabledShortcuts []string
	// Verify checks every decision against the plain framework and fails
	// the pass on a difference: for tests and debugging, at several
	// times a pass's cost.
	Verify bool
}

// DefaultSimulation samples three fit-existing decisions and one estimate
// of sixteen pods a pass: a few framework calls each, against the
// hundreds of thousands a large pass makes.
func DefaultSimulation() SimulationOptions {
	return SimulationOptions{ShadowFitSamples: 3, ShadowEstimateSamples: 1, ShadowEstimatePods: shortcut.DefaultEstimatePods}
}

func (o *SimulationOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.ShadowFitSamples, "simulation-shadow-fit-samples", o.ShadowFitSamples,
		"Per pass, this many fit-existing decisions are checked against the plain scheduler framework: the node chosen and a few of the nodes the simulation's shortcuts ruled out are judged by the framework itself. A difference counts in cluster_autoscaler_simulation_shadow_mismatches_total and gets a Warning event. 0: none.")
	fs.IntVar(&o.ShadowEstimateSamples, "simulation-shadow-estimate-samples", o.ShadowEstimateSamples,
		"Per pass, this many node-group estimates are recomputed without shortcuts, over their first --simulation-shadow-estimate-pods pods, and compared. 0: none.")
	fs.IntVar(&o.ShadowEstimatePods, "simulation-shadow-estimate-pods", o.ShadowEstimatePods,
		"How many pods (the first of the estimate's order) a shadow-checked estimate is recomputed for; the plain recomputation costs about the square of this in framework calls.")
	fs.BoolVar(&o.DisableShortcutOnMismatch, "simulation-shadow-disable-shortcut-on-mismatch", o.DisableShortcutOnMismatch,
		"Turn a simulation shortcut off for the rest of the process once the shadow check found it answering differently from the plain framework (slower passes, the framework's own answers).")
	fs.StringSliceVar(&o.DisabledShortcuts, "simulation-disable-shortcuts", o.DisabledShortcuts,
		"Simulation shortcuts to turn off from the start (comma-separated: "+shortcutNames()+"); an empty value turns every one on.")
	fs.BoolVar(&o.Verify, "simulation-verify", o.Verify,
		"Check every simulation decision against the plain scheduler framework and fail the pass on a difference. For tests and debugging: a pass costs several times as much.")
}

func shortcutNames() string {
	out := ""
	for i, n := range shortcut.All {
		if i > 0 {
			out += ", "
		}
		out += string(n)
	}
	return out
}

func (o *SimulationOptions) validate() error {
	var errs []error
	for name, v := range map[string]int{"--simulation-shadow-fit-samples": o.ShadowFitSamples,
		"--simulation-shadow-estimate-samples": o.ShadowEstimateSamples, "--simulation-shadow-estimate-pods": o.ShadowEstimatePods} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s=%d: must not be negative", name, v))
		}
	}
	for _, s := range o.DisabledShortcuts {
		if _, err := shortcut.Parse(s); err != nil {
			errs = append(errs, fmt.Errorf("--simulation-disable-shortcuts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Shortcuts is the set of shortcuts the options leave on.
func (o *SimulationOptions) Shortcuts() *shortcut.Set {
	set := &shortcut.Set{}
	for _, s := range o.DisabledShortcuts {
		if n, err := shortcut.Parse(s); err == nil {
			set.Disable(n)
		}
	}
	return set
}
