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
// The levels share one stack of undo steps, each level owning the steps
// from its start on: Commit then only forgets the top level's start, with
// no step copied, and the levels' bookkeeping is reused from fork to fork.
// A simulation forks and commits once per placed pod, inside a fork of its
// own that collects thousands of steps, so copying them on each Commit, and
// allocating a level on each Fork, was a noticeable part of its cost.
//
// Undo closures must restore raw state only and never record into the
// journal themselves: when they run, their level is already popped.
type journal struct {
	undo steps
	// levels[:open] are the open levels; the rest are kept for reuse.
	levels []level
	open   int
}

type level struct {
	// start is the index in undo of the level's first step.
	start int
	// owned names the NodeInfos created (cloned) in this level. A NodeInfo
	// may be mutated in place only by the level that created it; any other
	// level must clone it first, so that reverting restores the old pointer
	// with its old content (copy on write, O(pods of that node) once per
	// node and level).
	owned map[string]struct{}
}

func (j *journal) depth() int { return j.open }

func (j *journal) fork() {
	if j.open == len(j.levels) {
		j.levels = append(j.levels, level{owned: map[string]struct{}{}})
	}
	j.levels[j.open].start = j.undo.n
	j.open++
}

// top returns the innermost open level; there must be one.
func (j *journal) top() *level { return &j.levels[j.open-1] }

// record adds an undo step to the top level, if any.
func (j *journal) record(undo func()) {
	if j.open > 0 {
		j.undo.push(undo)
	}
}

// recording tells whether a fork is open, so that record would keep a
// step: callers make the step's closure only then. Building the snapshot
// (no fork) makes hundreds of thousands of changes, and their closures
// were nearly half of what the build allocated, all dropped at once.
func (j *journal) recording() bool { return j.open > 0 }

// revert pops the top level and runs its undo steps newest first. It
// returns how many steps it ran.
func (j *journal) revert() (int, error) {
	if j.open == 0 {
		return 0, errNoFork
	}
	top := j.top()
	j.open--
	n := j.undo.n - top.start
	j.undo.unwind(top.start)
	top.forget()
	return n, nil
}

// commit pops the top level and keeps its changes: its undo steps and owned
// NodeInfos become the level below's (if there is one), so that level can
// still undo them. With no level left the steps are dropped: the changes
// are final.
func (j *journal) commit() (int, error) {
	if j.open == 0 {
		return 0, errNoFork
	}
	top := j.top()
	j.open--
	n := j.undo.n - top.start
	if j.open > 0 {
		parent := j.top()
		for name := range top.owned {
			parent.owned[name] = struct{}{}
		}
	} else {
		j.undo.drop(0)
	}
	top.forget()
	return n, nil
}

// forget empties a popped level for reuse. Clearing a map costs its
// capacity, not its length, so a map grown by a large level is dropped
// rather than kept for the many small levels that tend to follow.
func (l *level) forget() {
	if len(l.owned) > 64 {
		l.owned = map[string]struct{}{}
		return
	}
	clear(l.owned)
}

// mayMutateInPlace reports whether the NodeInfo named name can be changed
// without cloning: always outside forks, and inside a fork only when the
// top level created that NodeInfo.
func (j *journal) mayMutateInPlace(name string) bool {
	if j.open == 0 {
		return true
	}
	_, ok := j.top().owned[name]
	return ok
}

// own records that the top level created the NodeInfo named name.
func (j *journal) own(name string) {
	if j.open > 0 {
		j.top().owned[name] = struct{}{}
	}
}

// put sets m[k] = v and records how to restore the previous entry.
func put[K comparable, V any](j *journal, m map[K]V, k K, v V) {
	if j.recording() {
		old, had := m[k]
		j.record(func() {
			if had {
				m[k] = old
			} else {
				delete(m, k)
			}
		})
	}
	m[k] = v
}

// del deletes m[k] and records how to restore it.
func del[K comparable, V any](j *journal, m map[K]V, k K) {
	old, had := m[k]
	if !had {
		return
	}
	if j.recording() {
		j.record(func() { m[k] = old })
	}
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

// refInc and refDec keep a reference-counted set: set holds the keys
// named at least once, extra how many times each is named beyond the
// first. Counting (rather than plain insert/delete) keeps the set right
// when two claims name the same device, e.g. a claim that is both
// allocated and still pending; counting only the extra names keeps the
// common case, one claim per device, to the set alone (the count map was
// written, and journaled, for every device of every claim written).
func refInc[K comparable](j *journal, extra map[K]int, set sets.Set[K], k K) {
	if !set.Has(k) {
		put(j, set, k, sets.Empty{})
		return
	}
	put(j, extra, k, extra[k]+1)
}

func refDec[K comparable](j *journal, extra map[K]int, set sets.Set[K], k K) {
	switch c := extra[k]; {
	case c > 1:
		put(j, extra, k, c-1)
	case c == 1:
		del(j, extra, k)
	default:
		del(j, set, k)
	}
}

// steps is the undo stack in blocks of stepBlock: a pass's removal
// simulation records tens of thousands of steps, and a slice grown by
// doubling allocated and copied twice what it held.
type steps struct {
	blocks [][]func()
	n      int
}

const stepBlock = 1024

func (s *steps) push(f func()) {
	b := s.n / stepBlock
	if b == len(s.blocks) {
		s.blocks = append(s.blocks, make([]func(), stepBlock))
	}
	s.blocks[b][s.n%stepBlock] = f
	s.n++
}

// unwind runs the steps from the newest down to index from, and drops
// them.
func (s *steps) unwind(from int) {
	for i := s.n - 1; i >= from; i-- {
		s.blocks[i/stepBlock][i%stepBlock]()
	}
	s.drop(from)
}

// drop forgets the steps from index from on, letting the closures and
// what they hold be collected; the blocks are kept for the next steps.
func (s *steps) drop(from int) {
	for i := from; i < s.n; {
		b, k := i/stepBlock, i%stepBlock
		end := min(stepBlock, k+s.n-i)
		clear(s.blocks[b][k:end])
		i += end - k
	}
	s.n = from
}
