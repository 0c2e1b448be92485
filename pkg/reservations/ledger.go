package reservations

import (
	"sync"
	"time"
)

// ledger remembers the launches of earlier loops until the provider's
// size shows them: a cloud that takes a while to report a new instance
// must not make its reservation look free again, or a later loop would
// launch onto it twice.
type ledger struct {
	mu     sync.Mutex
	ttl    time.Duration
	floors map[string]floor
}

type floor struct {
	size  int
	until time.Time
}

func newLedger(ttl time.Duration) *ledger {
	return &ledger{ttl: ttl, floors: map[string]floor{}}
}

// launched records that group, at size before, was asked for added more.
func (l *ledger) launched(group string, before, added int, now time.Time) {
	if added <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	size := before + added
	if f, ok := l.floors[group]; ok && now.Before(f.until) && f.size > before {
		size = f.size + added
	}
	l.floors[group] = floor{size: size, until: now.Add(l.ttl)}
}

// size is the group's size counting launches not visible yet. A floor
// goes once the provider shows it, or after ttl (the request was given up
// by then).
func (l *ledger) size(group string, reported int, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.floors[group]
	if !ok {
		return reported
	}
	if reported >= f.size || !now.Before(f.until) {
		delete(l.floors, group)
		return reported
	}
	return f.size
}
