package report

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Flood limits: each pod may hear notFloodBurst NotTriggerScaleUp events
// at once and one more per notFloodRefill after that. Deduplication keeps
// an unchanged message quiet; this keeps a message that changes every
// loop (room left shrinking as others are served) from becoming an event
// every loop.
const (
	notFloodBurst  = 5
	notFloodRefill = time.Minute
)

// limiter is a token bucket per object. Callers hold the reporter's lock.
type limiter struct {
	buckets map[types.UID]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (l *limiter) allow(uid types.UID, now time.Time) bool {
	if l.buckets == nil {
		l.buckets = map[types.UID]*bucket{}
	}
	b := l.buckets[uid]
	if b == nil {
		b = &bucket{tokens: notFloodBurst, last: now}
		l.buckets[uid] = b
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(notFloodBurst, b.tokens+elapsed.Seconds()/notFloodRefill.Seconds())
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (l *limiter) forget(alive map[types.UID]bool) {
	for uid := range l.buckets {
		if !alive[uid] {
			delete(l.buckets, uid)
		}
	}
}
