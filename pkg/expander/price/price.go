// Package price prefers the option whose new nodes cost least per pod
// helped. Options without a price are kept only when none has one.
package price

import (
	"math"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "price"

type strategy struct{}

// New returns the strategy.
func New() expander.Strategy { return strategy{} }

func (strategy) Name() string { return Name }

func (strategy) Best(options []expander.Option) []expander.Option {
	return expander.BestBy(options, func(o expander.Option) float64 {
		if o.Price < 0 || len(o.Pods) == 0 {
			return math.Inf(1)
		}
		return o.Price / float64(len(o.Pods))
	})
}
