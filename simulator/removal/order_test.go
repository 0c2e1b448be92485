package removal

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The order's worked-out positions are those of a list in which each node
// that comes to stay is moved, by hand, to just behind the staying ones:
// over random series of Stays (of nodes staying already too).
func TestOrderPositions(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		nStay, nMaybe := rng.IntN(4), 1+rng.IntN(40)
		var stay, maybe []string
		for i := range nStay {
			stay = append(stay, fmt.Sprintf("s%d", i))
		}
		for i := range nMaybe {
			maybe = append(maybe, fmt.Sprintf("m%d", i))
		}
		o := newOrder(stay, maybe)
		want, staying := slices.Concat(stay, maybe), nStay
		for step := range 2 * nMaybe {
			node := want[rng.IntN(len(want))]
			i := slices.Index(want, node)
			if got, ok := o.at(node); !ok || got != i {
				t.Fatalf("seed %d step %d: %s at %d (%v), want %d", seed, step, node, got, ok, i)
			}
			if i >= staying {
				if at := o.stay(i); at != staying {
					t.Fatalf("seed %d step %d: %s moved to %d, want %d", seed, step, node, at, staying)
				}
				want = slices.Insert(slices.Delete(want, i, i+1), staying, node)
				staying++
			}
			if !slices.Equal(o.nodes, want) || o.staying != staying {
				t.Fatalf("seed %d step %d: nodes %v (%d staying), want %v (%d)", seed, step, o.nodes, o.staying, want, staying)
			}
			for k, n := range want {
				if got, ok := o.at(n); !ok || got != k {
					t.Fatalf("seed %d step %d: %s at %d (%v), want %d", seed, step, n, got, ok, k)
				}
			}
		}
		if _, ok := o.at("elsewhere"); ok {
			t.Fatalf("seed %d: a node that is no destination has a position", seed)
		}
	}
}
