package snapshot

import (
	"slices"
	"strings"
	"testing"
)

// byName finds what nsKey stores, for names longer than its buffer too,
// and makes no key on the heap for the usual ones.
func TestByName(t *testing.T) {
	long := strings.Repeat("n", 200)
	m := map[string]int{nsKey("ns", "a"): 1, nsKey("ns", long): 2}
	for _, tc := range []struct {
		ns, name string
		want     int
		ok       bool
	}{
		{"ns", "a", 1, true},
		{"ns", long, 2, true},
		{"ns", "b", 0, false},
		{"n", "s/a", 0, false},
	} {
		if got, ok := byName(m, tc.ns, tc.name); got != tc.want || ok != tc.ok {
			t.Errorf("byName(%q, %.10q) = %d, %v; want %d, %v", tc.ns, tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = byName(m, "ns", "a") }); n != 0 {
		t.Errorf("byName allocates %v times a lookup", n)
	}
}

// The undo stack runs a level's steps newest first across its blocks,
// keeps the older ones, and lets the dropped closures go.
func TestStepsAcrossBlocks(t *testing.T) {
	var s steps
	var ran []int
	push := func(from, to int) {
		for i := from; i < to; i++ {
			s.push(func() { ran = append(ran, i) })
		}
	}
	push(0, 3*stepBlock+5)
	from := stepBlock + 7
	s.unwind(from)
	if len(ran) != 3*stepBlock+5-from || ran[0] != 3*stepBlock+4 || ran[len(ran)-1] != from {
		t.Fatalf("unwound %d steps, %d to %d; want %d, %d to %d", len(ran), ran[0], ran[len(ran)-1], 3*stepBlock+5-from, 3*stepBlock+4, from)
	}
	for i := 1; i < len(ran); i++ {
		if ran[i] != ran[i-1]-1 {
			t.Fatalf("step %d ran after %d", ran[i], ran[i-1])
		}
	}
	for i := from; i < len(s.blocks)*stepBlock; i++ {
		if s.blocks[i/stepBlock][i%stepBlock] != nil {
			t.Fatalf("step %d kept after unwinding", i)
		}
	}
	ran = nil
	push(from, from+2)
	s.unwind(from - 1)
	if want := []int{from + 1, from, from - 1}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	s.drop(0)
	if s.n != 0 || s.blocks[0][0] != nil {
		t.Fatalf("dropped: %d steps left", s.n)
	}
}
