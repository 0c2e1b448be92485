package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Prioritized-list policies (--dra-prioritized-list-policy).
const (
	// PrioritizedListScheduler follows the scheduler: a pod that fits
	// existing capacity with any alternative is left to it, and among
	// feasible nodes the earliest alternative is preferred, as the
	// DynamicResources score does.
	PrioritizedListScheduler = "scheduler"
	// PrioritizedListPreferExisting keeps pods on existing capacity with
	// whichever alternative fits and ranks nodes by fragmentation alone.
	PrioritizedListPreferExisting = "prefer-existing"
	// PrioritizedListPreferFirstAlternative adds a node when a pod's
	// first alternative fits only a new node.
	PrioritizedListPreferFirstAlternative = "prefer-first-alternative"
)

// PrioritizedListPolicies are the values --dra-prioritized-list-policy takes.
var PrioritizedListPolicies = []string{PrioritizedListScheduler, PrioritizedListPreferExisting, PrioritizedListPreferFirstAlternative}

// SharingOptions configure how the autoscaler handles shared devices:
// partitionable devices, consumable capacity and prioritized lists.
type SharingOptions struct {
	// FragmentationAwarePlacement ranks the nodes a pod fits by the
	// fragmentation a placement adds instead of taking the first.
	FragmentationAwarePlacement bool
	// PrioritizedListPolicy is one of PrioritizedListPolicies.
	PrioritizedListPolicy string
	// StrandedCapacityBudget bounds the time one pass spends measuring
	// stranded capacity; nodes not reached keep their last figures.
	StrandedCapacityBudget time.Duration
	// PlacementRankingBudget bounds the time one pass spends ranking
	// nodes by fragmentation; past it the pass's other pods take the
	// first node that fits.
	PlacementRankingBudget time.Duration
	// RequestShapeRetention is how long a request shape counts as
	// recently seen after the last pod that had it.
	RequestShapeRetention time.Duration
}

// DefaultSharing returns the defaults.
func DefaultSharing() SharingOptions {
	return SharingOptions{
		FragmentationAwarePlacement: true,
		PrioritizedListPolicy:       PrioritizedListScheduler,
		StrandedCapacityBudget:      2 * time.Second,
		PlacementRankingBudget:      2 * time.Second,
		RequestShapeRetention:       time.Hour,
	}
}

func (o *SharingOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.FragmentationAwarePlacement, "dra-fragmentation-aware-placement", o.FragmentationAwarePlacement,
		"Among the nodes a pending pod fits, prefer the one where its DRA devices add the least stranded capacity (fill partly used GPUs first); false takes the first node that fits.")
	fs.StringVar(&o.PrioritizedListPolicy, "dra-prioritized-list-policy", o.PrioritizedListPolicy,
		"What to do when a pod's first DRA alternative (firstAvailable) fits only a new node while a later one fits existing capacity: "+strings.Join(PrioritizedListPolicies, ", ")+".")
	fs.DurationVar(&o.StrandedCapacityBudget, "dra-stranded-capacity-budget", o.StrandedCapacityBudget,
		"Time one loop may spend measuring stranded DRA capacity; nodes not reached keep their previous figures.")
	fs.DurationVar(&o.PlacementRankingBudget, "dra-placement-ranking-budget", o.PlacementRankingBudget,
		"Time one loop may spend ranking nodes by fragmentation for the pods that fit existing capacity; past it the other pods take the first node that fits.")
	fs.DurationVar(&o.RequestShapeRetention, "dra-request-shape-retention", o.RequestShapeRetention,
		"How long a DRA request shape counts as recently seen for stranded-capacity metrics after the last pod with it.")
}

func (o *SharingOptions) validate() []error {
	var errs []error
	if !contains(PrioritizedListPolicies, o.PrioritizedListPolicy) {
		errs = append(errs, fmt.Errorf("--dra-prioritized-list-policy=%q: must be one of %s", o.PrioritizedListPolicy, strings.Join(PrioritizedListPolicies, ", ")))
	}
	if o.StrandedCapacityBudget <= 0 {
		errs = append(errs, fmt.Errorf("--dra-stranded-capacity-budget=%s: must be positive", o.StrandedCapacityBudget))
	}
	if o.PlacementRankingBudget <= 0 {
		errs = append(errs, fmt.Errorf("--dra-placement-ranking-budget=%s: must be positive", o.PlacementRankingBudget))
	}
	if o.RequestShapeRetention <= 0 {
		errs = append(errs, fmt.Errorf("--dra-request-shape-retention=%s: must be positive", o.RequestShapeRetention))
	}
	return errs
}
