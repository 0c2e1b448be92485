package framework

import (
	"errors"
	"testing"
)

func TestLargestFitting(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		lo, hi    int64
		limit     int64 // fits(n) is n <= limit
		failAt    int64 // fits errs at this n (0: never)
		want      int64
		wantCalls int
		wantErr   bool
	}{
		{name: "hi fits", lo: 1, hi: 8, limit: 8, want: 8, wantCalls: 1},
		{name: "between", lo: 0, hi: 8, limit: 5, want: 5, wantCalls: 4},
		{name: "only lo", lo: 0, hi: 8, limit: 0, want: 0, wantCalls: 4},
		{name: "empty range", lo: 3, hi: 3, limit: 0, want: 3, wantCalls: 0},
		{name: "error", lo: 0, hi: 8, limit: 5, failAt: 4, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got, err := LargestFitting(tc.lo, tc.hi, func(n int64) (bool, error) {
				calls++
				if n == tc.failAt && tc.failAt != 0 {
					return false, boom
				}
				return n <= tc.limit, nil
			})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %d, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want || calls != tc.wantCalls {
				t.Errorf("got %d (%v) in %d calls, want %d in %d", got, err, calls, tc.want, tc.wantCalls)
			}
		})
	}
}
