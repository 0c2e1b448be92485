package parallel

import (
	"sync/atomic"
	"testing"
)

// Each calls fn exactly once per piece, whether it splits them or not.
func TestEach(t *testing.T) {
	for _, tc := range []struct{ n, atLeast int }{{0, 1}, {1, 1}, {10, 100}, {1000, 1}, {1000, 256}, {5, 0}} {
		calls := make([]atomic.Int32, tc.n)
		Each(tc.n, tc.atLeast, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Fatalf("n=%d atLeast=%d: piece %d called %d times", tc.n, tc.atLeast, i, c)
			}
		}
	}
}
