package backoff

import (
	"testing"
	"time"
)

func TestBackoffGrowsCapsAndResets(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := New(5*time.Minute, 30*time.Minute, 3*time.Hour)
	steps := []struct {
		at   time.Duration
		want time.Duration // backoff length from this failure
	}{
		{0, 5 * time.Minute},
		{10 * time.Minute, 10 * time.Minute},
		{30 * time.Minute, 20 * time.Minute},
		{time.Hour, 30 * time.Minute},
		{2 * time.Hour, 30 * time.Minute},
		{6 * time.Hour, 5 * time.Minute}, // quiet for > reset: starts over
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		st := b.Fail("g", "timeout", now)
		if got := st.Until.Sub(now); got != s.want {
			t.Errorf("failure %d: backoff %s, want %s", i, got, s.want)
		}
		if _, off := b.Get("g", now.Add(s.want-time.Second)); !off {
			t.Errorf("failure %d: not backed off just before the end", i)
		}
		if _, off := b.Get("g", now.Add(s.want)); off {
			t.Errorf("failure %d: still backed off at the end", i)
		}
	}
	b.Succeeded("g")
	if _, off := b.Get("g", t0.Add(6*time.Hour)); off {
		t.Error("backed off after success")
	}
	if _, off := b.Get("other", t0); off {
		t.Error("unknown group backed off")
	}
}
