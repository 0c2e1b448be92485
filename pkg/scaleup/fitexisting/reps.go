package fitexisting

import (
	"fmt"
	"slices"
)

// keyReps keeps, for the sweep's candidates in their current state, the
// first candidate of each node key and every candidate without a key: the
// nodes a keyed class's first scan filters, there being no verdict yet
// (judge marks the first node of each key, and each node without one, to
// filter). A full cluster has a few kinds of node in a few states and a
// hundred classes that fit none of them; each such class used to walk
// every candidate to find those few.
//
// Candidates change only where the sweep places pods (s.changes), so the
// list follows those nodes' keys; a change of the snapshot's shared
// generation, which keys also rest on, makes it again from the start.
type keyReps struct {
	// keys holds each candidate's key, by candidate index; nil until the
	// first use.
	keys []string
	// first is each key's first candidate; count how many candidates
	// have it; keyless the candidates without a key.
	first   map[string]int
	count   map[string]int
	keyless map[int]bool
	// synced is how many of s.changes keys follows; shared the shared
	// generation it was made at.
	synced int
	shared uint64
	// names is the list made from first and keyless, nil when stale.
	names []string
}

// fresh reports whether cs is a keyed class's first scan: no verdict,
// nothing closed, every candidate open.
func (s *sweeper) fresh(cs *classState, open []string) bool {
	return cs != nil && cs.byKey != nil && cs.last == nil && cs.nClosed == 0 && len(cs.fits) == 0 &&
		len(cs.byKey) == 0 && len(open) == len(s.candidates)
}

// list returns the first candidate of each key and every candidate
// without one, in candidate order. The caller must not modify it.
func (r *keyReps) list(s *sweeper) []string {
	if shared := s.runner.Snapshot().NodeGen("").Shared; r.keys == nil || r.shared != shared {
		r.build(s, shared)
	}
	for _, n := range s.changes[r.synced:] {
		if i, ok := s.indexOf(n); ok {
			r.rekey(i, s.opts.Keys.Of(n))
		}
	}
	r.synced = len(s.changes)
	if r.names == nil {
		at := make([]int, 0, len(r.first)+len(r.keyless))
		for _, i := range r.first {
			at = append(at, i)
		}
		for i := range r.keyless {
			at = append(at, i)
		}
		slices.Sort(at)
		r.names = make([]string, len(at))
		for j, i := range at {
			r.names[j] = s.candidates[i]
		}
	}
	return r.names
}

func (r *keyReps) build(s *sweeper, shared uint64) {
	*r = keyReps{keys: make([]string, len(s.candidates)), first: map[string]int{}, count: map[string]int{},
		keyless: map[int]bool{}, synced: len(s.changes), shared: shared}
	for i, k := range s.opts.Keys.OfAll(s.candidates) {
		r.keys[i] = k
		r.add(i, k)
	}
}

func (r *keyReps) add(i int, k string) {
	if k == "" {
		r.keyless[i] = true
		return
	}
	if f, ok := r.first[k]; !ok || i < f {
		r.first[k] = i
	}
	r.count[k]++
}

// rekey gives candidate i key k.
func (r *keyReps) rekey(i int, k string) {
	old := r.keys[i]
	if old == k {
		return
	}
	r.keys[i], r.names = k, nil
	if old == "" {
		delete(r.keyless, i)
	} else if r.count[old]--; r.count[old] == 0 {
		delete(r.count, old)
		delete(r.first, old)
	} else if r.first[old] == i {
		// i was the first: the next candidate with the key is after it.
		for j := i + 1; j < len(r.keys); j++ {
			if r.keys[j] == old {
				r.first[old] = j
				break
			}
		}
	}
	r.add(i, k)
}

// verifyFresh panics unless a walk of the fresh class lists unknown to
// filter and finds nothing else (judge has no verdict to record then).
func (s *sweeper) verifyFresh(cs *classState, open, unknown []string) {
	r := s.walk(cs, open, nil, &s.scratch.walk)
	s.scratch.walk = r
	if len(r.feasible) > 0 || !slices.Equal(r.unknown, unknown) {
		panic(fmt.Sprintf("fitexisting: a keyed class's first scan lists %q to filter and %q feasible, the sweep's list is %q", r.unknown, r.feasible, unknown))
	}
}
