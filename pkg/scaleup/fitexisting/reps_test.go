package fitexisting

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestKeyRepsFollowChanges rekeys candidates at random, as placements do,
// and checks after each change that the first candidate of every key, the
// counts and the keyless candidates are what counting afresh gives.
func TestKeyRepsFollowChanges(t *testing.T) {
	keys := []string{"", "a", "b", "c", "d"}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 1 + rng.IntN(30)
		r := keyReps{keys: make([]string, n), first: map[string]int{}, count: map[string]int{}, keyless: map[int]bool{}}
		for i := range n {
			r.keys[i] = keys[rng.IntN(len(keys))]
			r.add(i, r.keys[i])
		}
		for step := range 60 {
			i, k := rng.IntN(n), keys[rng.IntN(len(keys))]
			r.rekey(i, k)
			first, count, keyless := map[string]int{}, map[string]int{}, map[int]bool{}
			for j, k := range r.keys {
				if k == "" {
					keyless[j] = true
					continue
				}
				if _, ok := first[k]; !ok {
					first[k] = j
				}
				count[k]++
			}
			if !maps.Equal(first, r.first) || !maps.Equal(count, r.count) || !maps.Equal(keyless, r.keyless) {
				t.Fatalf("seed %d step %d (candidate %d to %q): keys %q: first %v count %v keyless %v, counted afresh %v %v %v",
					seed, step, i, k, r.keys, r.first, r.count, r.keyless, first, count, keyless)
			}
		}
	}
}
