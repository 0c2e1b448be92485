// Package shortcut names the simulation's shortcuts (the ways a pass
// avoids asking the scheduler framework a question whose answer it
// already knows) and lets each be turned off, and checks them against
// the plain framework: every decision in verify mode, a few per pass in
// production (the shadow check). The rulebook of what each shortcut
// assumes is docs/design/caches.md.
package shortcut

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Name is one shortcut.
type Name string

// The shortcuts, as metrics, logs and flags name them.
const (
	// FitClasses: fit-existing closes the nodes that rejected a class of
	// pods for the rest of the sweep, and gives a class up once it fits
	// nowhere.
	FitClasses Name = "fitClasses"
	// FitMemo: fit-existing keeps a memoizable class's fits while the
	// node's generation holds, and scans on from the class's last scan.
	FitMemo Name = "fitMemo"
	// NodeKeys: fit-existing asks the framework about one node of each
	// key (estimator.NodeKeys) and reads the others' verdicts off it.
	NodeKeys Name = "nodeKeys"
	// PlacementCopy: fit-existing copies a placement between nodes of one
	// key instead of scheduling again.
	PlacementCopy Name = "placementCopy"
	// EstimateMemo: the estimator memoises verdicts per (node state,
	// class), clones placements and keeps nodes virtual.
	EstimateMemo Name = "estimateMemo"
	// EstimateClasses: the estimator closes nodes to a class and gives a
	// class up once it does not fit an empty node.
	EstimateClasses Name = "estimateClasses"
	// SharedEstimate: groups whose templates are alike to the filters
	// share one estimate.
	SharedEstimate Name = "sharedEstimate"
	// Carry: a group's estimate is carried into the planner's next round.
	Carry Name = "carry"
	// AnalyzerCache: the fragmentation analyzer keeps measurements per
	// node generation.
	AnalyzerCache Name = "analyzerCache"
	// AlikePlacements: a gang's pod group cycle tries one placement of
	// each kind and copies its outcome to the placements alike to it.
	AlikePlacements Name = "alikePlacements"
	// RemovalMemo: scale-down's removal simulation keeps a memoizable
	// class's Filter verdicts "does not fit" per node generation for the
	// pass, so pods moved off later candidates pass the nodes the earlier
	// moves filled without filtering them again.
	RemovalMemo Name = "removalMemo"
	// RemovalCopy: with removalMemo, the removal simulation copies a
	// placement the framework made for a class between destinations of
	// one node key instead of scheduling again, and keeps its verdicts
	// "does not fit" by key too.
	RemovalCopy Name = "removalCopy"
)

// All are every shortcut, in the order above.
var All = []Name{FitClasses, FitMemo, NodeKeys, PlacementCopy, EstimateMemo, EstimateClasses, SharedEstimate, Carry, AnalyzerCache, AlikePlacements, RemovalMemo, RemovalCopy}

func (n Name) bit() uint32 {
	for i, m := range All {
		if m == n {
			return 1 << i
		}
	}
	panic(fmt.Sprintf("shortcut: unknown shortcut %q", n))
}

// Parse returns the shortcut named s.
func Parse(s string) (Name, error) {
	for _, n := range All {
		if string(n) == s {
			return n, nil
		}
	}
	names := make([]string, len(All))
	for i, n := range All {
		names[i] = string(n)
	}
	return "", fmt.Errorf("unknown shortcut %q (known: %s)", s, strings.Join(names, ", "))
}

// Set says which shortcuts are on. The zero value and nil have every
// shortcut on. A shortcut may be turned off while passes run (the shadow
// check does, on a mismatch); it is read at the start of each decision.
type Set struct{ off atomic.Uint32 }

// Plain returns a set with every shortcut off: every answer is the
// framework's own.
func Plain() *Set {
	s := &Set{}
	for _, n := range All {
		s.Disable(n)
	}
	return s
}

// Without returns a set with only the named shortcuts off.
func Without(names ...Name) *Set {
	s := &Set{}
	for _, n := range names {
		s.Disable(n)
	}
	return s
}

// On reports whether n is on.
func (s *Set) On(n Name) bool { return s == nil || s.off.Load()&n.bit() == 0 }

// Disable turns n off; it reports whether n was on.
func (s *Set) Disable(n Name) bool {
	b := n.bit()
	for {
		old := s.off.Load()
		if old&b != 0 {
			return false
		}
		if s.off.CompareAndSwap(old, old|b) {
			return true
		}
	}
}

// Off lists the shortcuts that are off.
func (s *Set) Off() []Name {
	var out []Name
	for _, n := range All {
		if !s.On(n) {
			out = append(out, n)
		}
	}
	return out
}

// Suspend turns n off until resume is called, if it is on (resume does
// nothing otherwise): for a plain answer computed beside the shortcut's,
// by parts that read the set (the fragmentation analyzer). Passes are
// not concurrent with it.
func (s *Set) Suspend(n Name) (resume func()) {
	if s == nil || !s.Disable(n) {
		return func() {}
	}
	b := n.bit()
	return func() { s.off.And(^b) }
}
