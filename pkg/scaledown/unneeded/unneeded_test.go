package unneeded

import (
	"fmt"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := New()
	tr.Update([]string{"a", "b"}, t0)
	tr.Update([]string{"b", "c"}, t0.Add(time.Minute))
	steps := []struct {
		node string
		at   time.Duration
		want bool
	}{
		{"a", 20 * time.Minute, false}, // needed again at t0+1m: forgotten
		{"b", 10 * time.Minute, true},  // unneeded since t0
		{"b", 9 * time.Minute, false},
		{"c", 10 * time.Minute, false}, // only since t0+1m
		{"c", 11 * time.Minute, true},
	}
	for _, s := range steps {
		if got := tr.Ready(s.node, t0.Add(s.at), 10*time.Minute); got != s.want {
			t.Errorf("Ready(%s, +%s) = %v, want %v", s.node, s.at, got, s.want)
		}
	}
	if got := fmt.Sprint(tr.Nodes()); got != "[b c]" || tr.Len() != 2 {
		t.Errorf("Nodes = %s, want [b c]", got)
	}
}
