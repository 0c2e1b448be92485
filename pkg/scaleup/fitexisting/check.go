package fitexisting

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// Checking decisions against the plain framework (docs/design/caches.md).
//
// Verify mode asks, before each decision, what FitWith without a
// shortcut decides for the pod in the same state (a fork, reverted), and
// compares. The shadow check, sampled in production, cannot afford a
// plain decision over thousands of nodes; it checks verdicts instead: the
// shortcut decides in a fork, which is reverted, and the framework
// judges, in the state the decision met, the node chosen and a few of the
// nodes the shortcuts ruled out without asking it (closed to the class,
// ruled out by their key, or every node for a class given up); then the
// shortcut decides again, for real, and must decide alike.

// shadowNodes bounds the nodes ruled out that one shadow check judges.
const shadowNodes = 3

// checks says which of a FitWith's decisions are checked, by their
// index over all sweeps.
type checks struct {
	sample func(i int) bool
	next   int
}

func (c *checks) take() bool {
	i := c.next
	c.next++
	return c.sample != nil && c.sample(i)
}

// checked is decide, checked when the decision is sampled.
func (s *sweeper) checked(ctx context.Context, pod *corev1.Pod, class string, cs *classState) (string, error) {
	if !s.checks.take() {
		return s.decide(ctx, pod, cs)
	}
	if s.opts.Check.Verify {
		return s.verified(ctx, pod, class, cs)
	}
	return s.shadowed(ctx, pod, class, cs)
}

// verified decides for pod after the plain framework did, in a fork.
func (s *sweeper) verified(ctx context.Context, pod *corev1.Pod, class string, cs *classState) (string, error) {
	want, err := s.plainDecision(ctx, pod)
	if err != nil {
		return "", err
	}
	got, err := s.decide(ctx, pod, cs)
	if err != nil {
		return "", err
	}
	s.opts.Check.Checked("fitExisting")
	if got != want {
		node := want
		if node == "" {
			node = got
		}
		s.mismatch(pod, class, node, s.blame(cs, got, want), answer(got), answer(want))
	}
	return got, nil
}

// plainDecision is the node FitWith without a shortcut places pod on in
// the snapshot's state, which it leaves as it found it.
func (s *sweeper) plainDecision(ctx context.Context, pod *corev1.Pod) (_ string, err error) {
	snap := s.runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("plain decision: revert: %w", rerr)
		}
	}()
	// The ranking's analyzer reads the same set: without its memos too.
	defer s.opts.Shortcuts.Suspend(shortcut.AnalyzerCache)()
	_, fits, err := FitWith(ctx, s.runner, []*corev1.Pod{pod}, s.candidates, s.opts.plain())
	if err != nil {
		return "", fmt.Errorf("plain decision: %w", err)
	}
	return fits[pod], nil
}

// blame names the shortcut that made the decision differ from the plain
// one: the plain node was closed to the class, or ruled out by its key;
// the decision was a copied placement; a memoized class's fits or scan;
// "" when none of them was involved.
func (s *sweeper) blame(cs *classState, got, want string) shortcut.Name {
	// A key's verdict closes the nodes it rules out: the key is asked
	// first.
	switch {
	case want != "" && s.ruledOutByKey(cs, want):
		return shortcut.NodeKeys
	case want != "" && cs != nil && (cs.hopeless || s.isClosed(cs, want)):
		return shortcut.FitClasses
	case got != "" && s.copied:
		return shortcut.PlacementCopy
	case cs != nil && cs.fits != nil:
		return shortcut.FitMemo
	}
	return ""
}

func (s *sweeper) ruledOutByKey(cs *classState, node string) bool {
	fits, known, _ := s.byKey(cs, node)
	return known && !fits
}

// shadowed decides for pod in a fork, has the framework judge the
// decision's node and a few of the nodes ruled out without it in the
// state the decision met, then decides again for real.
func (s *sweeper) shadowed(ctx context.Context, pod *corev1.Pod, class string, cs *classState) (string, error) {
	snap := s.runner.Snapshot()
	snap.Fork()
	got, err := s.decide(ctx, pod, cs)
	copied := s.copied
	if rerr := snap.Revert(); rerr != nil {
		return "", errors.Join(err, fmt.Errorf("shadow check: revert: %w", rerr))
	}
	if err != nil {
		return "", err
	}
	judged, why := s.ruledOut(cs, got)
	nodes := judged
	if got != "" {
		nodes = append([]string{got}, judged...)
	}
	results, err := s.runner.FilterUntil(ctx, pod, nodes, 0)
	if err != nil {
		return "", fmt.Errorf("shadow check: %w", err)
	}
	s.opts.Check.Checked("fitExisting")
	for _, r := range results {
		switch {
		case r.Node == got && !r.Fits:
			name := shortcut.Name("")
			if copied {
				name = shortcut.PlacementCopy
			}
			s.mismatch(pod, class, got, name, "fits", "does not fit: "+r.Message)
		case r.Node != got && r.Fits:
			s.mismatch(pod, class, r.Node, why[r.Node], "does not fit", "fits")
		}
	}
	again, err := s.decide(ctx, pod, cs)
	if err != nil {
		return "", err
	}
	if again != got {
		s.mismatch(pod, class, again, "", answer(again), answer(got)+" (the same decision, made a moment before in the same state)")
	}
	return again, nil
}

// ruledOut picks up to shadowNodes nodes the shortcuts ruled out for
// pod's class without asking the framework, and which shortcut did.
func (s *sweeper) ruledOut(cs *classState, got string) ([]string, map[string]shortcut.Name) {
	if cs == nil {
		return nil, nil
	}
	why := map[string]shortcut.Name{}
	var pool []string
	for _, n := range s.candidates {
		if n == got {
			continue
		}
		switch {
		case s.ruledOutByKey(cs, n):
			why[n] = shortcut.NodeKeys
		case cs.hopeless || s.isClosed(cs, n):
			why[n] = shortcut.FitClasses
		default:
			continue
		}
		pool = append(pool, n)
	}
	var out []string
	for len(out) < shadowNodes && len(pool) > 0 {
		i := s.opts.Check.Pick(len(pool))
		out = append(out, pool[i])
		pool[i] = pool[len(pool)-1]
		pool = pool[:len(pool)-1]
	}
	return out, why
}

func (s *sweeper) mismatch(pod *corev1.Pod, class, node string, name shortcut.Name, got, want string) {
	s.opts.Check.Found(shortcut.Mismatch{Shortcut: name, Kind: "fitExisting", Pod: pod.Namespace + "/" + pod.Name, Class: class,
		Node: node, Got: got, Want: want})
}

// answer says a decision in words.
func answer(node string) string {
	if node == "" {
		return "no node"
	}
	return "node " + node
}
