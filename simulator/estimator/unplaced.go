package estimator

import (
	"iter"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// UnplacedPods are the pods an estimate did not place, in the order tried,
// held as runs of consecutive pods of the estimate's order that share a
// verdict. A run is a piece of the order itself, so an estimate that
// leaves thousands of pods out (the classes its template cannot hold:
// 7,000 of L2-distinct's 8,000 pods in each of 100 groups) holds a few
// dozen runs instead of an entry per pod, and the groups estimated over
// one order have the same pieces, which Dropped filters once per round.
// Runs are never written once the estimate is made: carried and renamed
// estimates share them.
type UnplacedPods struct {
	runs []unplacedRun
	n    int
}

type unplacedRun struct {
	// pods is a subslice of an order (or of a filtered copy): never
	// appended to, as its capacity reaches into the rest of the order.
	pods   []*v1.Pod
	result *framework.NodeResult
	limit  string
}

// sliceID names a slice by its storage, for slices never written once
// shared (runs, lists of runs, used-device lists): the same ID, the same
// elements. Empty slices have the zero ID.
type sliceID[T any] struct {
	at *T
	n  int
}

func idOf[T any](s []T) sliceID[T] {
	if len(s) == 0 {
		return sliceID[T]{}
	}
	return sliceID[T]{at: &s[0], n: len(s)}
}

// Len is the number of unplaced pods.
func (u UnplacedPods) Len() int { return u.n }

// All yields the unplaced pods in the order they were tried.
func (u UnplacedPods) All() iter.Seq[Unplaced] {
	return func(yield func(Unplaced) bool) {
		for _, r := range u.runs {
			for _, p := range r.pods {
				if !yield(Unplaced{Pod: p, Result: r.result, Limit: r.limit}) {
					return
				}
			}
		}
	}
}

// add appends order[i]: it lengthens the last run when that run ends
// right before order[i] in the same array with the same verdict.
func (u *UnplacedPods) add(order []*v1.Pod, i int, result *framework.NodeResult, limit string) {
	u.n++
	if k := len(u.runs) - 1; k >= 0 {
		r := &u.runs[k]
		if r.result == result && r.limit == limit && len(r.pods) < cap(r.pods) {
			if next := r.pods[:len(r.pods)+1]; &next[len(r.pods)] == &order[i] {
				r.pods = next
				return
			}
		}
	}
	u.runs = append(u.runs, unplacedRun{pods: order[i : i+1], result: result, limit: limit})
}

// addRun appends pods, all with one verdict.
func (u *UnplacedPods) addRun(pods []*v1.Pod, result *framework.NodeResult, limit string) {
	if len(pods) == 0 {
		return
	}
	u.n += len(pods)
	u.runs = append(u.runs, unplacedRun{pods: slices.Clip(pods), result: result, limit: limit})
}

// shared is u for another estimate to hold: appending to it cannot reach
// u's runs.
func (u UnplacedPods) shared() UnplacedPods {
	u.runs = slices.Clip(u.runs)
	return u
}
