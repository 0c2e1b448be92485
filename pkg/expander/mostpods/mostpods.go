// Package mostpods prefers the option that helps the most pods.
package mostpods

import "github.com/dra-autoscaler/dra-autoscaler/pkg/expander"

// Name is the --expander value.
const Name = "most-pods"

type strategy struct{}

// New returns the strategy.
func New() expander.Strategy { return strategy{} }

func (strategy) Name() string { return Name }

func (strategy) Best(options []expander.Option) []expander.Option {
	return expander.BestBy(options, func(o expander.Option) float64 { return -float64(len(o.Pods)) })
}
