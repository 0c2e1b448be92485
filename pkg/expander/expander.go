// Package expander chooses which node group grows when several could help.
// Each strategy keeps the options it likes best; a chain applies them in
// turn (--expander=priority,least-waste), and the first option left wins,
// so the choice is deterministic unless the chain says random.
package expander

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Option is one way to scale up: NodeCount new nodes of a group, on which
// the estimator placed Pods.
type Option struct {
	NodeGroup string
	NodeCount int
	Pods      []*corev1.Pod
	Template  *cloudprovider.NodeTemplate
	// DevicesUsed is how many template devices the pods' claims took on the
	// new nodes (counted from the simulated allocations).
	DevicesUsed int
	// Price is the hourly price of the new nodes; negative when unknown.
	Price float64
	// CapacityType is how the group's nodes are bought (reserved,
	// on-demand, spot; "" when unknown) and ReservedNodes how many of the
	// new nodes land on capacity reservations.
	CapacityType  string
	ReservedNodes int
}

// Strategy narrows the options to the ones it prefers. It never returns an
// empty list for a non-empty input.
type Strategy interface {
	Name() string
	Best(options []Option) []Option
}

// Chain applies strategies in order.
type Chain []Strategy

// Choose returns the winning option, or nil when there is none.
func (c Chain) Choose(options []Option) *Option {
	if len(options) == 0 {
		return nil
	}
	sorted := append([]Option(nil), options...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].NodeGroup < sorted[j].NodeGroup })
	for _, s := range c {
		if len(sorted) == 1 {
			break
		}
		if best := s.Best(sorted); len(best) > 0 {
			sorted = best
		}
	}
	return &sorted[0]
}

// Names lists the chain, for logs.
func (c Chain) Names() []string {
	out := make([]string, len(c))
	for i, s := range c {
		out[i] = s.Name()
	}
	return out
}

// BestBy keeps the options with the lowest score.
func BestBy(options []Option, score func(Option) float64) []Option {
	var best []Option
	bestScore := 0.0
	for _, o := range options {
		s := score(o)
		switch {
		case len(best) == 0 || s < bestScore-1e-9:
			best, bestScore = []Option{o}, s
		case s <= bestScore+1e-9:
			best = append(best, o)
		}
	}
	return best
}

// Factory builds a strategy by name.
type Factory func() (Strategy, error)

// Build makes the chain from names, each looked up in factories.
func Build(names []string, factories map[string]Factory) (Chain, error) {
	var chain Chain
	for _, n := range names {
		f, ok := factories[n]
		if !ok {
			return nil, fmt.Errorf("unknown expander %q", n)
		}
		s, err := f()
		if err != nil {
			return nil, fmt.Errorf("expander %s: %w", n, err)
		}
		chain = append(chain, s)
	}
	return chain, nil
}
