// Package poll waits for a condition on a live cluster and, when it times
// out, says what it last saw: "timed out waiting for 8 pods bound" alone
// leaves a developer guessing, the last state seen does not. The e2e
// framework and the demo (hack/demo) both wait with it.
package poll

import (
	"context"
	"time"
)

// Interval is how often Until looks again.
const Interval = 200 * time.Millisecond

// Check reports whether the wait is over, and what it saw.
type Check func(ctx context.Context) (done bool, seen string, err error)

// Until waits until check reports done without an error, or timeout.
func Until(ctx context.Context, timeout time.Duration, what string, check Check) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var seen string
	var lastErr error
	for {
		done, s, err := check(ctx)
		if done && err == nil {
			return nil
		}
		seen, lastErr = s, err
		select {
		case <-ctx.Done():
			return &TimeoutError{What: what, After: timeout, LastSeen: seen, LastErr: lastErr}
		case <-time.After(Interval):
		}
	}
}

// Holds checks that ok stays true for the whole duration d; it returns the
// first failure, with what was seen then.
func Holds(ctx context.Context, d time.Duration, what string, check Check) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, seen, err := check(ctx)
		if err != nil || !ok {
			return &BrokenError{What: what, Seen: seen, Err: err}
		}
		select {
		case <-ctx.Done():
			return &BrokenError{What: what, Seen: seen, Err: ctx.Err()}
		case <-time.After(Interval):
		}
	}
	return nil
}

// TimeoutError says what was waited for and what was last seen.
type TimeoutError struct {
	What     string
	After    time.Duration
	LastSeen string
	LastErr  error
}

func (e *TimeoutError) Error() string {
	msg := "timed out after " + e.After.String() + " waiting for " + e.What + "; last seen: " + e.LastSeen
	if e.LastErr != nil {
		msg += "; last error: " + e.LastErr.Error()
	}
	return msg
}

// BrokenError says which condition stopped holding, and what was seen.
type BrokenError struct {
	What string
	Seen string
	Err  error
}

func (e *BrokenError) Error() string {
	msg := e.What + " stopped holding: seen " + e.Seen
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}
