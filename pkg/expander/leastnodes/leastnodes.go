// Package leastnodes prefers the option that adds the fewest nodes.
package leastnodes

import "github.com/dra-autoscaler/dra-autoscaler/pkg/expander"

// Name is the --expander value.
const Name = "least-nodes"

type strategy struct{}

// New returns the strategy.
func New() expander.Strategy { return strategy{} }

func (strategy) Name() string { return Name }

func (strategy) Best(options []expander.Option) []expander.Option {
	return expander.BestBy(options, func(o expander.Option) float64 { return float64(o.NodeCount) })
}
