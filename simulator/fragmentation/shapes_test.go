package fragmentation

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestShapes(t *testing.T) {
	r, ctx := newRunner(t)
	load(t, r, migNode("n1"))
	running := place(t, ctx, r, "running", "s2", "n1")
	placed, _ := r.Snapshot().PlacedPod(ns, running.Name)
	pending := []*v1.Pod{podFor("a", "s3"), podFor("b", "s3"), podFor("c", "whole")}
	s := NewShapes(time.Hour)
	t0 := time.Unix(0, 0)
	s.Observe(r.Snapshot(), append([]*v1.Pod{placed}, pending...), t0)
	got := s.Active(t0)
	if len(got) != 3 {
		t.Fatalf("%d shapes, want 3 (2 slices, 3 slices, whole)", len(got))
	}
	if got[0].size != 3 || got[len(got)-1].size != 1 {
		t.Errorf("shapes not largest first: sizes %d..%d", got[0].size, got[len(got)-1].size)
	}
	cached := s.byPod[pending[0].UID].shape
	s.Observe(r.Snapshot(), pending[:1], t0.Add(30*time.Minute))
	if s.byPod[pending[0].UID].shape != cached {
		t.Error("unchanged pod's shape computed again")
	}
	if len(s.byPod) != 1 {
		t.Errorf("%d pods cached, want only the one observed last", len(s.byPod))
	}
	// Shapes not seen for longer than the retention are forgotten.
	if got := s.Active(t0.Add(80 * time.Minute)); len(got) != 1 || got[0].Key != cached.Key {
		t.Errorf("after retention: %d shapes, want the one seen recently", len(got))
	}
	if _, ok := ShapeOf(r.Snapshot(), placed, false); ok {
		t.Error("an allocated claim counted as a new request")
	}
}
