package poll

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	calls := 0
	err := Until(context.Background(), time.Second, "third call", func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "", nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Until = %v after %d calls, want nil after 3", err, calls)
	}
	err = Until(context.Background(), 300*time.Millisecond, "never", func(context.Context) (bool, string, error) {
		return true, "2 of 3 nodes", errors.New("list failed") // done with an error is not done
	})
	var te *TimeoutError
	if !errors.As(err, &te) || te.LastSeen != "2 of 3 nodes" || !strings.Contains(err.Error(), "waiting for never; last seen: 2 of 3 nodes; last error: list failed") {
		t.Errorf("Until = %v, want a timeout saying what it last saw", err)
	}
}

func TestHolds(t *testing.T) {
	if err := Holds(context.Background(), 300*time.Millisecond, "always", func(context.Context) (bool, string, error) {
		return true, "", nil
	}); err != nil {
		t.Errorf("Holds = %v", err)
	}
	calls := 0
	err := Holds(context.Background(), time.Second, "two nodes", func(context.Context) (bool, string, error) {
		calls++
		return calls < 2, "3 nodes", nil
	})
	var be *BrokenError
	if !errors.As(err, &be) || be.Seen != "3 nodes" || calls != 2 {
		t.Errorf("Holds = %v after %d calls, want broken at the second", err, calls)
	}
}
