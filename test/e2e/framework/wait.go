package framework

import (
	"context"
	"testing"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/test/poll"
)

// Poll is how often waits look again.
const Poll = poll.Interval

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
	return poll.Until(ctx, timeout, what, check)
}

// Consistently checks that cond holds for the whole duration.
func Consistently(ctx context.Context, t testing.TB, d time.Duration, what string, check func(ctx context.Context) (ok bool, seen string, err error)) {
	t.Helper()
	if err := poll.Holds(ctx, d, what, check); err != nil {
		t.Fatal(err)
	}
}

// TimeoutError says what was waited for and what was last seen.
type TimeoutError = poll.TimeoutError
