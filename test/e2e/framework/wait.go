package framework

import (
	"context"
	"testing"
	"time"
)

// Poll is how often waits look again.
const Poll = 200 * time.Millisecond

// Eventually waits until check reports done. check returns what it saw, so
// a timeout says what the cluster last looked like, not only that it failed.
func Eventually(ctx context.Context, t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) (done bool, seen string, err error)) {
	t.Helper()
	if err := WaitFor(ctx, timeout, what, check); err != nil {
		t.Fatal(err)
	}
}

// WaitFor is Eventually returning the error instead of failing the test.
func WaitFor(ctx context.Context, timeout time.Duration, what string, check func(ctx context.Context) (done bool, seen string, err error)) error {
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
		case <-time.After(Poll):
		}
	}
}

// Consistently checks that cond holds for the whole duration.
func Consistently(ctx context.Context, t testing.TB, d time.Duration, what string, check func(ctx context.Context) (ok bool, seen string, err error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, seen, err := check(ctx)
		if err != nil || !ok {
			t.Fatalf("%s stopped holding: seen %s (err %v)", what, seen, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(Poll):
		}
	}
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
