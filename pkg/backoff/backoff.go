// Package backoff keeps failed node groups out of scale-up for a while:
// exponentially longer after each failure in a row, from an initial to a
// maximum duration, forgiven after a quiet period.
package backoff

import (
	"sync"
	"time"
)

// Entry is one group's backoff.
type Entry struct {
	Until  time.Time
	Reason string
	// Failures counts failures in a row (since the last reset).
	Failures int
}

// Backoff tracks every group. Safe for concurrent use.
type Backoff struct {
	initial, max, reset time.Duration
	mu                  sync.Mutex
	groups              map[string]*entry
}

type entry struct {
	Entry
	lastFailure time.Time
}

// New returns a backoff that starts at initial, doubles up to max and
// starts over after reset without failures.
func New(initial, max, reset time.Duration) *Backoff {
	return &Backoff{initial: initial, max: max, reset: reset, groups: map[string]*entry{}}
}

// Fail records a failure of the group at now and returns its new status.
func (b *Backoff) Fail(group, reason string, now time.Time) Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.groups[group]
	if e == nil || now.Sub(e.lastFailure) > b.reset {
		e = &entry{}
		b.groups[group] = e
	}
	d := b.initial
	for i := 0; i < e.Failures && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	e.Failures++
	e.lastFailure = now
	e.Until = now.Add(d)
	e.Reason = reason
	return e.Entry
}

// Get returns the group's status and whether it is backed off at now.
func (b *Backoff) Get(group string, now time.Time) (Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.groups[group]
	if e == nil {
		return Entry{}, false
	}
	return e.Entry, now.Before(e.Until)
}

// Succeeded forgets the group's failures after a scale-up that worked.
func (b *Backoff) Succeeded(group string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, group)
}
