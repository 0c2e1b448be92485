// Package fragmentation prefers the scale-up option whose new nodes are
// left with the least stranded DRA capacity once the pods are placed:
// free counters, consumable capacity or devices that no recently seen
// request shape can use (see simulator/fragmentation).
package fragmentation

import (
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "fragmentation"

// Scorer returns the stranded fraction of an option's new nodes (0 none
// stranded, 1 all of it); options without devices score 0.
type Scorer func(expander.Option) float64

type strategy struct{ score Scorer }

// New returns the strategy.
func New(score Scorer) expander.Strategy { return strategy{score: score} }

func (strategy) Name() string { return Name }

func (s strategy) Best(options []expander.Option) []expander.Option {
	return expander.BestBy(options, s.score)
}
