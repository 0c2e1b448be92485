package fitexisting

import (
	"cmp"
	"fmt"
	"slices"
)

// scan walks open in order and returns the nodes known to fit and the
// nodes to filter, up to the Sample-th node known before this call's
// filtering (fits; its fits are taken but not counted, as filtering may
// find a few more than it was asked for): one node per key with no
// verdict yet, every node without a key. Nodes a key rules out are
// closed. keys holds the feasible nodes' keys, read off the memo, when
// the class has keys (cs.byKey); nil otherwise.
//
// A memoizable class's scan starts from its last one (scanFrom); the
// result is what walking open from its start gives.
func (s *sweeper) scan(cs *classState, open []string, fits map[string]bool) (feasible, keys, unknown []string) {
	if cs == nil || cs.fits == nil {
		r := s.walk(cs, open, fits, &s.scratch.walk)
		s.scratch.walk = r
		return r.feasible, r.keys, r.unknown
	}
	stamp := s.stamp()
	var r scanResult
	if base := cs.last; base != nil && base.stamp.epoch == stamp.epoch && base.stamp.shared == stamp.shared {
		r = s.scanFrom(cs, open, fits, base, cs.spare)
		if verifyScans {
			full := s.walk(cs, open, fits, &s.scratch.walk)
			s.scratch.walk = full
			if d := diffScans(r, full); d != "" {
				panic(fmt.Sprintf("fitexisting: the scan from the last one differs from a full scan: %s", d))
			}
		}
	} else {
		r = s.walk(cs, open, fits, cs.spare)
	}
	r.stamp = stamp
	// The last result is the base of the next scan; the other buffer is
	// written next (the caller reads this result until then).
	cs.spare, cs.last = cs.last, &r
	if cs.spare == nil {
		cs.spare = &scanResult{}
	}
	return r.feasible, r.keys, r.unknown
}

// scanResult is what a scan found, and where it stopped.
type scanResult struct {
	feasible, keys, unknown []string
	// at holds the feasible nodes' candidate indexes, -1 where not
	// looked up yet: the next scan from this one merges by index, and
	// carries the indexes on instead of hashing each name again.
	at []int
	// pending are the nodes before the stop that are neither feasible
	// nor closed: unknown, or sharing a key asked about.
	pending []string
	// end is the candidate index of the node the scan stopped at, when
	// it stopped at the Sample-th known fit; done when it walked all.
	end   int
	done  bool
	stamp scanStamp
}

// scanStamp says what a scan's result rests on besides closed nodes and
// memoised verdicts: the sweep's placements so far, its clearing of
// memos, and the snapshot's shared generation.
type scanStamp struct {
	changes, epoch int
	shared         uint64
}

func (s *sweeper) stamp() scanStamp {
	return scanStamp{changes: len(s.changes), epoch: s.epoch, shared: s.runner.Snapshot().NodeGen("").Shared}
}

// emptyResult is an empty result on buf's storage (nil: none).
func emptyResult(buf *scanResult, keyed bool) scanResult {
	var r scanResult
	if buf != nil {
		r = *buf
	}
	r.feasible, r.keys, r.unknown, r.pending, r.at = r.feasible[:0], r.keys[:0], r.unknown[:0], r.pending[:0], r.at[:0]
	if !keyed {
		r.keys = nil
	}
	r.end, r.done = 0, false
	return r
}

// add adds feasible node n, at its candidate index (-1: not known).
func (r *scanResult) add(n, key string, at int, keyed bool) {
	r.feasible = append(r.feasible, n)
	r.at = append(r.at, at)
	if keyed {
		r.keys = append(r.keys, key)
	}
}

// verdict is what a scan makes of one node.
type verdict int

const (
	notOpen     verdict = iota // closed, or ruled out by its key (closed now)
	knownFit                   // known to fit
	filteredFit                // found to fit by this call's filtering
	toFilter                   // to filter
	keyAsked                   // to learn from the node asked about its key
)

// judge is a scan's verdict on node n, at candidate index at (-1: not
// known); key is its key when known. asked holds the keys with a node to
// filter.
func (s *sweeper) judge(cs *classState, n string, at int, fits, asked map[string]bool) (verdict, string) {
	if (at >= 0 && cs.closedAt(at)) || (at < 0 && s.isClosed(cs, n)) {
		return notOpen, ""
	}
	if len(fits) > 0 {
		if fit, filtered := fits[n]; filtered {
			if fit {
				// Filtered this call: a keyed class memoised it.
				return filteredFit, cs.fitsKey(n)
			}
			return notOpen, ""
		}
	}
	snap := s.runner.Snapshot()
	fit, ok, key := false, false, ""
	if cs != nil && cs.fits != nil {
		if m, memo := cs.fits[n]; memo && m.gen == snap.NodeGen(n) {
			fit, ok, key = true, true, m.key
		}
	}
	if !ok {
		if fit, ok, key = s.byKey(cs, n); ok && fit && cs.fits != nil {
			// Known by key at this generation: the next scans read it
			// off the cheaper memo.
			cs.fits[n] = memoFit{gen: snap.NodeGen(n), key: key}
		}
	}
	switch {
	case ok && fit:
		return knownFit, key
	case ok:
		s.close(cs, n)
		return notOpen, ""
	case key == "":
		return toFilter, ""
	case !asked[key]:
		asked[key] = true
		return toFilter, key
	default:
		return keyAsked, key
	}
}

// take adds n's verdict v to r, n being at candidate index at (-1: not
// known), with known the count of known fits so far; stop says the
// Sample-th known fit was reached.
func (s *sweeper) take(r *scanResult, n, key string, at int, v verdict, keyed bool, known *int) (stop bool) {
	switch v {
	case knownFit:
		if *known++; *known >= s.opts.Sample {
			if at < 0 {
				at = s.index(n)
			}
			r.add(n, key, at, keyed)
			r.end = at
			return true
		}
		r.add(n, key, at, keyed)
	case filteredFit:
		r.add(n, key, at, keyed)
	case toFilter:
		r.unknown = append(r.unknown, n)
		r.pending = append(r.pending, n)
	case keyAsked:
		r.pending = append(r.pending, n)
	}
	return false
}

// walk scans open from its start, as the first scan of a class does,
// reusing buf's storage (nil: none).
func (s *sweeper) walk(cs *classState, open []string, fits map[string]bool, buf *scanResult) scanResult {
	keyed := cs != nil && cs.byKey != nil
	r := emptyResult(buf, keyed)
	asked := reuse(&s.scratch.asked)
	known := 0
	s.walkOn(&r, cs, open, fits, asked, keyed, &known)
	return r
}

// walkOn goes on walking nodes after what r holds.
func (s *sweeper) walkOn(r *scanResult, cs *classState, nodes []string, fits, asked map[string]bool, keyed bool, known *int) {
	for _, n := range nodes {
		v, key := s.judge(cs, n, -1, fits, asked)
		if s.take(r, n, key, -1, v, keyed, known) {
			return
		}
	}
	r.done = true
}

// scanFrom is scan started from base, the class's last result. Between
// two scans of a class its open nodes change only so: nodes pods were
// placed on since (the sweep's only writes; rankings and filters run in
// forks they revert), nodes closed, and the verdicts filtering found for
// the nodes base left pending. So base's feasible nodes still fit, with
// the same keys, unless closed or changed; the changed and pending nodes
// are judged again in their place; and the walk goes on after base's
// stop if the known fits fall short of Sample.
func (s *sweeper) scanFrom(cs *classState, open []string, fits map[string]bool, base *scanResult, buf *scanResult) scanResult {
	keyed := cs.byKey != nil
	r := emptyResult(buf, keyed)
	asked := reuse(&s.scratch.asked)
	// The nodes to judge again, by their index among the candidates
	// (sorted as integers, each name looked up once), up to base's stop.
	redo := s.scratch.redo[:0]
	for _, n := range base.pending {
		redo = append(redo, s.index(n))
	}
	for _, n := range s.changes[base.stamp.changes:] {
		if at := s.index(n); base.done || at <= base.end {
			redo = append(redo, at)
		}
	}
	slices.Sort(redo)
	redo = slices.Compact(redo)
	defer func() { s.scratch.redo = redo[:0] }()
	known := 0
	i, j := 0, 0
	for i < len(base.feasible) || j < len(redo) {
		var n, key string
		var v verdict
		at := -1 // base.feasible[i]'s index
		if i < len(base.feasible) {
			if at = base.at[i]; at < 0 {
				at = s.index(base.feasible[i])
				base.at[i] = at
			}
		}
		switch {
		case j < len(redo) && (i == len(base.feasible) || redo[j] <= at):
			if redo[j] == at {
				i++
			}
			at = redo[j]
			n = s.candidates[at]
			j++
			v, key = s.judge(cs, n, at, fits, asked)
		default:
			n = base.feasible[i]
			if keyed {
				key = base.keys[i]
			}
			i++
			v = knownFit
			if cs.closedAt(at) {
				v = notOpen
			} else if len(fits) > 0 {
				if fit, filtered := fits[n]; filtered {
					v = notOpen
					if fit {
						v = filteredFit
					}
				}
			}
		}
		if s.take(&r, n, key, at, v, keyed, &known) {
			return r
		}
	}
	if base.done {
		r.done = true
		return r
	}
	from, _ := slices.BinarySearchFunc(open, base.end+1, func(n string, at int) int { return cmp.Compare(s.index(n), at) })
	s.walkOn(&r, cs, open[from:], fits, asked, keyed, &known)
	return r
}

// index is node's position among the candidates.
func (s *sweeper) index(node string) int {
	i, _ := s.indexOf(node)
	return i
}

// indexOf is node's position among the candidates, ok false when it is
// not one.
func (s *sweeper) indexOf(node string) (int, bool) {
	if s.positions == nil {
		s.positions = make(map[string]int, len(s.candidates))
		for i, n := range s.candidates {
			s.positions[n] = i
		}
	}
	i, ok := s.positions[node]
	return i, ok
}

// verifyScans makes every scan from a last one also walk from the start
// and panic when they differ (the package's tests set it).
var verifyScans = false

func diffScans(a, b scanResult) string {
	switch {
	case !slices.Equal(a.feasible, b.feasible):
		return fmt.Sprintf("feasible %q, full %q", a.feasible, b.feasible)
	case !slices.Equal(a.keys, b.keys):
		return "keys differ"
	case !sameIndexes(a, b):
		return "candidate indexes differ"
	case !slices.Equal(a.unknown, b.unknown):
		return fmt.Sprintf("unknown %q, full %q", a.unknown, b.unknown)
	case !slices.Equal(a.pending, b.pending):
		return fmt.Sprintf("pending %q, full %q", a.pending, b.pending)
	case a.done != b.done || (!a.done && a.end != b.end):
		return fmt.Sprintf("stopped at %d (done %v), full at %d (done %v)", a.end, a.done, b.end, b.done)
	}
	return ""
}

// sameIndexes reports whether a's and b's known candidate indexes agree.
func sameIndexes(a, b scanResult) bool {
	for i := range min(len(a.at), len(b.at)) {
		if a.at[i] >= 0 && b.at[i] >= 0 && a.at[i] != b.at[i] {
			return false
		}
	}
	return len(a.at) == len(a.feasible) && len(b.at) == len(b.feasible)
}
