package shortcut_test

import (
	"strings"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

func TestSet(t *testing.T) {
	var nilSet *shortcut.Set
	if !nilSet.On(shortcut.NodeKeys) {
		t.Error("a nil set has a shortcut off")
	}
	s := shortcut.Without(shortcut.Carry)
	if s.On(shortcut.Carry) || !s.On(shortcut.NodeKeys) {
		t.Errorf("Without(carry): off %v", s.Off())
	}
	if !s.Disable(shortcut.NodeKeys) || s.Disable(shortcut.NodeKeys) {
		t.Error("Disable reports whether the shortcut was on")
	}
	resume := s.Suspend(shortcut.FitMemo)
	if s.On(shortcut.FitMemo) {
		t.Fatal("suspended shortcut on")
	}
	resume()
	if !s.On(shortcut.FitMemo) {
		t.Fatal("resumed shortcut off")
	}
	// Suspending what is off leaves it off.
	s.Suspend(shortcut.NodeKeys)()
	if s.On(shortcut.NodeKeys) {
		t.Fatal("suspend turned on a shortcut that was off")
	}
	if got := len(shortcut.Plain().Off()); got != len(shortcut.All) {
		t.Errorf("Plain has %d off, want all %d", got, len(shortcut.All))
	}
}

func TestParse(t *testing.T) {
	for _, n := range shortcut.All {
		if got, err := shortcut.Parse(string(n)); err != nil || got != n {
			t.Errorf("Parse(%q) = %q, %v", n, got, err)
		}
	}
	if _, err := shortcut.Parse("memo"); err == nil || !strings.Contains(err.Error(), "known: fitClasses") {
		t.Errorf("Parse(memo): %v, want the known names listed", err)
	}
}

// The pass's budget bounds the checks: a few fit decisions at random, a
// few estimates over a few pods; verify mode checks everything; the
// budget comes back each pass.
func TestCheckerBudget(t *testing.T) {
	c := &shortcut.Checker{FitSamples: 3, EstimateSamples: 1, EstimatePods: 8}
	c.StartPass()
	pick := c.Fits(100)
	n := 0
	for i := range 100 {
		if pick(i) {
			n++
		}
	}
	if n != 3 || c.Fits(100) != nil {
		t.Errorf("%d decisions picked, and a second run got a budget too", n)
	}
	if ok, pods := c.Estimate(); !ok || pods != 8 {
		t.Errorf("estimate check %v over %d pods", ok, pods)
	}
	if ok, _ := c.Estimate(); ok {
		t.Error("a second estimate check in one pass")
	}
	c.StartPass()
	if ok, _ := c.Estimate(); !ok {
		t.Error("no estimate check in the next pass")
	}
	v := &shortcut.Checker{Verify: true}
	if pick := v.Fits(5); pick == nil || !pick(4) {
		t.Error("verify mode does not check every decision")
	}
	if ok, pods := v.Estimate(); !ok || pods != 0 {
		t.Errorf("verify mode estimate check %v over %d pods, want all", ok, pods)
	}
	var none *shortcut.Checker
	if none.Fits(10) != nil {
		t.Error("a nil checker checks")
	}
}

// A mismatch is reported, makes the pass's error, and with
// DisableOnMismatch turns its shortcut off.
func TestCheckerFound(t *testing.T) {
	set := &shortcut.Set{}
	var told []shortcut.Mismatch
	c := &shortcut.Checker{Set: set, DisableOnMismatch: true, Report: func(m shortcut.Mismatch) { told = append(told, m) }}
	c.StartPass()
	if c.Err() != nil {
		t.Fatal("an error before any mismatch")
	}
	m := shortcut.Mismatch{Shortcut: shortcut.NodeKeys, Kind: "fitExisting", Pod: "ns/p", Node: "n3", Got: "no node", Want: "node n3"}
	c.Found(m)
	if len(told) != 1 || set.On(shortcut.NodeKeys) {
		t.Errorf("told %v, nodeKeys on %v", told, set.On(shortcut.NodeKeys))
	}
	want := `fitExisting shortcut "nodeKeys" pod ns/p node n3: shortcut says no node, the plain framework node n3`
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Err() = %v, want it to say %q", err, want)
	}
	c.StartPass()
	if c.Err() != nil {
		t.Error("a mismatch outlived its pass")
	}
}

func TestFault(t *testing.T) {
	undo := shortcut.InjectFault(shortcut.NodeKeys)
	if !shortcut.Faulty(shortcut.NodeKeys) || shortcut.Faulty(shortcut.Carry) {
		t.Fatal("fault not where injected")
	}
	undo()
	if shortcut.Faulty(shortcut.NodeKeys) {
		t.Fatal("fault outlived undo")
	}
}
