// Package reserved prefers options that land on capacity already paid for:
// nodes on reservations first, then on-demand, then spot (which can be
// taken back). Among options entirely on reservations, the cheaper
// reservation wins when every one has a price. First in the default chain
// (--expander=reserved,least-waste).
package reserved

import (
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "reserved"

type strategy struct{}

// New returns the strategy.
func New() expander.Strategy { return strategy{} }

func (strategy) Name() string { return Name }

func (strategy) Best(options []expander.Option) []expander.Option {
	best := expander.BestBy(options, Tier)
	if len(best) < 2 || Tier(best[0]) != 0 {
		return best
	}
	for _, o := range best {
		if o.Price < 0 || len(o.Pods) == 0 {
			return best
		}
	}
	return expander.BestBy(best, func(o expander.Option) float64 { return o.Price / float64(len(o.Pods)) })
}

// Tier is the mean over the option's new nodes of 0 for a node on a
// reservation, 1 on-demand (or unknown), 2 spot.
func Tier(o expander.Option) float64 {
	if o.NodeCount <= 0 {
		return 1
	}
	rest := 1.0
	if o.CapacityType == "spot" {
		rest = 2
	}
	reserved := min(o.ReservedNodes, o.NodeCount)
	return rest * float64(o.NodeCount-reserved) / float64(o.NodeCount)
}
