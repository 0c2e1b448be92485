package snapshot

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/sets"
)

// errNoFork is returned by Revert and Commit when no Fork is open.
var errNoFork = errors.New("snapshot: no fork to revert or commit")

// journal is an undo log with one level per open Fork. Every mutation of the
// snapshot records, in the top level, a closure that restores what the
// mutation overwrote. Revert runs the top level's closures newest first;
// Commit hands them to the level below, so that reverting that level still
// undoes them. Both therefore cost O(changes made in the level), never
// O(cluster). With no fork open nothing is recorded: changes are final.
//
// Undo closures must restore raw state only and never record into the
// journal themselves: when they run, their level is already popped.
type journal struct {
	levels []*level
}

type level struct {
	undo []func()
	// owned names the NodeInfos created (cloned) in this level. A NodeInfo
	// may be mutated in place only by the level that created it; any other
	// level must clone it first, so that reverting restores the old pointer
	// with its old content (copy on write, O(pods of that node) once per
	// node and level).
	owned map[string]struct{}
}

func (j *journal) depth() int { return len(j.levels) }

func (j *journal) fork() {
	j.levels = append(j.levels, &level{owned: map[string]struct{}{}})
}

// record adds an undo step to the top level, if any.
func (j *journal) record(undo func()) {
	if n := len(j.levels); n > 0 {
		j.levels[n-1].undo = append(j.levels[n-1].undo, undo)
	}
}

// revert pops the top level and runs its undo steps newest first. It
// returns how many steps it ran.
func (j *journal) revert() (int, error) {
	n := len(j.levels)
	if n == 0 {
		return 0, errNoFork
	}
	top := j.levels[n-1]
	j.levels = j.levels[:n-1]
	for i := len(top.undo) - 1; i >= 0; i-- {
		top.undo[i]()
	}
	return len(top.undo), nil
}

// commit pops the top level and keeps its changes: its undo steps and owned
// NodeInfos move to the level below (if there is one), so that level can
// still undo them.
func (j *journal) commit() (int, error) {
	n := len(j.levels)
	if n == 0 {
		return 0, errNoFork
	}
	top := j.levels[n-1]
	j.levels = j.levels[:n-1]
	if n > 1 {
		parent := j.levels[n-2]
		parent.undo = append(parent.undo, top.undo...)
		for name := range top.owned {
			parent.owned[name] = struct{}{}
		}
	}
	return len(top.undo), nil
}

// mayMutateInPlace reports whether the NodeInfo named name can be changed
// without cloning: always outside forks, and inside a fork only when the
// top level created that NodeInfo.
func (j *journal) mayMutateInPlace(name string) bool {
	n := len(j.levels)
	if n == 0 {
		return true
	}
	_, ok := j.levels[n-1].owned[name]
	return ok
}

// own records that the top level created the NodeInfo named name.
func (j *journal) own(name string) {
	if n := len(j.levels); n > 0 {
		j.levels[n-1].owned[name] = struct{}{}
	}
}

// put sets m[k] = v and records how to restore the previous entry.
func put[K comparable, V any](j *journal, m map[K]V, k K, v V) {
	old, had := m[k]
	j.record(func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
	m[k] = v
}

// del deletes m[k] and records how to restore it.
func del[K comparable, V any](j *journal, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	j.record(func() { m[k] = old })
	delete(m, k)
}

// inner returns the inner map m[k], creating it (undoably) if needed. Inner
// maps are never deleted, only emptied, so undo closures that captured one
// always refer to the live map.
func inner[K, K2 comparable, V any](j *journal, m map[K]map[K2]V, k K) map[K2]V {
	if in, ok := m[k]; ok {
		return in
	}
	in := map[K2]V{}
	put(j, m, k, in)
	return in
}

// innerSet is inner for maps of sets.
func innerSet[K, K2 comparable](j *journal, m map[K]sets.Set[K2], k K) sets.Set[K2] {
	if in, ok := m[k]; ok {
		return in
	}
	in := sets.New[K2]()
	put(j, m, k, in)
	return in
}

// refInc and refDec keep a reference-counted set: set holds the keys whose
// count is positive. Counting (rather than plain insert/delete) keeps the
// set right when two claims name the same device, e.g. a claim that is both
// allocated and still pending.
func refInc[K comparable](j *journal, counts map[K]int, set sets.Set[K], k K) {
	c := counts[k]
	put(j, counts, k, c+1)
	if c == 0 {
		put(j, set, k, sets.Empty{})
	}
}

func refDec[K comparable](j *journal, counts map[K]int, set sets.Set[K], k K) {
	c := counts[k]
	switch {
	case c <= 0:
		return
	case c == 1:
		del(j, counts, k)
		del(j, set, k)
	default:
		put(j, counts, k, c-1)
	}
}
