// Package unneeded remembers since when each node has been unneeded: a
// node is removed only once it stayed unneeded, pass after pass, for
// --scale-down-unneeded-time, so a short lull does not cost a node that
// is needed again a minute later.
package unneeded

import (
	"sort"
	"time"
)

// Ledger holds the first time each node was found unneeded in an
// unbroken series of passes.
type Ledger struct {
	since map[string]time.Time
}

// New returns an empty tracker.
func New() *Ledger { return &Ledger{since: map[string]time.Time{}} }

// Update records the nodes found unneeded in the pass at now: nodes seen
// before keep their time, new ones start now, and the others are
// forgotten (needed again, or gone).
func (t *Ledger) Update(nodes []string, now time.Time) {
	next := make(map[string]time.Time, len(nodes))
	for _, n := range nodes {
		if s, ok := t.since[n]; ok {
			next[n] = s
		} else {
			next[n] = now
		}
	}
	t.since = next
}

// Since returns when the node became unneeded.
func (t *Ledger) Since(node string) (time.Time, bool) {
	s, ok := t.since[node]
	return s, ok
}

// Ready tells whether the node has been unneeded for at least d.
func (t *Ledger) Ready(node string, now time.Time, d time.Duration) bool {
	s, ok := t.since[node]
	return ok && now.Sub(s) >= d
}

// Nodes are the unneeded nodes, longest unneeded first, then by name.
func (t *Ledger) Nodes() []string {
	out := make([]string, 0, len(t.since))
	for n := range t.since {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := t.since[out[i]], t.since[out[j]]
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i] < out[j]
	})
	return out
}

// Len is the number of unneeded nodes.
func (t *Ledger) Len() int { return len(t.since) }
