// Package random picks one option at random.
package random

import (
	"math/rand/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "random"

type strategy struct{ rng *rand.Rand }

// New returns the strategy; seed makes it repeatable in tests.
func New(seed uint64) expander.Strategy {
	return strategy{rng: rand.New(rand.NewPCG(seed, seed))}
}

func (strategy) Name() string { return Name }

func (s strategy) Best(options []expander.Option) []expander.Option {
	return []expander.Option{options[s.rng.IntN(len(options))]}
}
