// Package fitexisting drops the pending pods that fit capacity the
// cluster already has or has already asked for (nodes still being
// provisioned): the scheduler will place them without new nodes, and
// counting them again would scale up twice.
package fitexisting

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Fit places, in the runner's snapshot, every pod that fits a candidate
// node, and returns the rest in their order plus where the others went.
// Once a pod of an equivalence class fits nowhere, the later pods of that
// class are not tried: the cluster only gets fuller as pods are placed.
// classOf returns "" for pods that must always be tried (pod affinity can
// make a placement enable the next).
func Fit(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, classOf func(*corev1.Pod) string) ([]*corev1.Pod, map[*corev1.Pod]string, error) {
	return FitWith(ctx, runner, pods, candidates, Options{ClassOf: classOf})
}

// RankFunc orders nodes where a pod fits (the framework's Filter said
// so), preferred first (see pkg/placement). With Options.Keys it must
// rank nodes with equal keys alike, ties going to the earlier node: it
// is then given only the first node of each key.
type RankFunc func(ctx context.Context, pod *corev1.Pod, feasible []string) ([]string, error)

// Options say how FitWith tries the pods.
type Options struct {
	// ClassOf groups equivalent pods; "" for pods always tried. Nil: every
	// pod is tried.
	ClassOf func(*corev1.Pod) string
	// ClassifyAll, when set, is given the pods before they are tried,
	// to compute what ClassOf and Memoizable answer side by side
	// (estimator.Estimator.ClassifyAll); nil: each is computed when
	// asked.
	ClassifyAll func([]*corev1.Pod)
	// Memoizable says a pod's class verdict on a node depends on that
	// node alone (estimator.Memoizable): a fit found there still holds
	// while the node's generation (snapshot.Gen) is the same. Nil: none.
	Memoizable func(*corev1.Pod) bool
	// Rank orders the feasible nodes for a pod; nil keeps the candidates'
	// order and takes the first that fits.
	Rank RankFunc
	// Sample is how many feasible nodes Rank is given per pod; 0 means
	// NumFeasibleNodesToFind of the candidates.
	Sample int
	// Keys says which nodes look alike to a pod (estimator.NodeKeys): for
	// a memoizable, keyable pod, one node's verdict stands for every node
	// with its key. Nil: each node is asked about.
	Keys Keys
	// PodInfo returns a pod's scheduler PodInfo, kept across passes, for
	// the placed pod to share; nil or a nil result: the framework makes
	// one when the pod is placed.
	PodInfo func(*corev1.Pod) fwk.PodInfo
	// Copier, with Keys, copies the placement the framework made for a
	// pod of a memoizable, keyable class to the next node of the same
	// key a pod of the class goes to, instead of scheduling it again
	// (estimator.Estimator; the copy is exact, TestCopyPlacementIsExact).
	// Nil: every placement is the framework's.
	Copier Copier
	// Shortcuts turns the shortcuts above off one by one (nil: as the
	// fields say): FitClasses (ClassOf), FitMemo (Memoizable), NodeKeys
	// (Keys) and PlacementCopy (Copier). Read once per FitWith.
	Shortcuts *shortcut.Set
	// Check compares decisions with the plain framework's (check.go);
	// nil: none.
	Check *shortcut.Checker
}

// gated is o with the shortcuts its Shortcuts turn off left out.
func (o Options) gated() Options {
	set := o.Shortcuts
	if !set.On(shortcut.FitClasses) {
		o.ClassOf = nil
	}
	if !set.On(shortcut.FitMemo) {
		o.Memoizable = nil
	}
	if o.ClassOf == nil && o.Memoizable == nil {
		o.ClassifyAll = nil
	}
	if !set.On(shortcut.NodeKeys) {
		o.Keys = nil
	}
	if o.Keys == nil || !set.On(shortcut.PlacementCopy) {
		o.Copier = nil
	}
	return o
}

// plain is o without a shortcut: every pod is tried on every candidate
// and every verdict and placement is the framework's.
func (o Options) plain() Options {
	return Options{Rank: o.Rank, Sample: o.Sample, PodInfo: o.PodInfo}
}

// Copier copies placements between nodes with equal keys.
type Copier interface {
	// CapturePlacement returns placed's placement on node, ok false
	// when it cannot be copied exactly.
	CapturePlacement(placed *corev1.Pod, node string) (*estimator.NodePlacement, bool)
	// CopyPlacement places pod on node as p says, node's key being the
	// one p's node had; false, with nothing changed, when it declines.
	CopyPlacement(pod *corev1.Pod, info fwk.PodInfo, p *estimator.NodePlacement, node string) (bool, error)
}

// Keys tells nodes apart by what the filters read of them.
type Keys interface {
	// Keyable reports whether pod's verdict on a node is all in its key.
	Keyable(pod *corev1.Pod) bool
	// Of returns node's key in its current state, "" for a node like no
	// other.
	Of(node string) string
	// OfAll is Of of each node (made side by side where it can be).
	OfAll(nodes []string) []string
}

// maxSweeps bounds the passes over the pods: a pod with inter-pod
// affinity (class "") may fit only once a pod after it in the order is
// placed, as it would once the scheduler binds that pod, so such pods are
// tried again while a sweep places anything.
const maxSweeps = 3

// FitRanked is Fit with each pod's feasible nodes ordered by rank.
func FitRanked(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, classOf func(*corev1.Pod) string, rank RankFunc) ([]*corev1.Pod, map[*corev1.Pod]string, error) {
	return FitWith(ctx, runner, pods, candidates, Options{ClassOf: classOf, Rank: rank})
}

// FitWith is Fit as opts say. Every verdict is the framework's; what is
// saved is only asking it the same question twice:
//   - per class, the nodes that rejected it stay closed for the sweep
//     (the cluster only fills up, the argument that makes a class
//     hopeless once it fits nowhere);
//   - per memoizable class, nodes it fits stay known to fit while their
//     generation holds;
//   - the framework filters in chunks and stops once it has found enough
//     feasible nodes to rank (Sample), as the scheduler stops at
//     numFeasibleNodesToFind, or, without ranking, at the first fit.
func FitWith(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string, opts Options) ([]*corev1.Pod, map[*corev1.Pod]string, error) {
	if opts.Sample <= 0 {
		opts.Sample = NumFeasibleNodesToFind(len(candidates))
	}
	opts = opts.gated()
	if opts.ClassifyAll != nil {
		opts.ClassifyAll(pods)
	}
	if opts.ClassOf == nil {
		opts.ClassOf = func(*corev1.Pod) string { return "" }
	}
	placed := map[*corev1.Pod]string{}
	rest := pods
	checks := &checks{sample: opts.Check.Fits(len(pods))}
	for sweep := 0; sweep < maxSweeps; sweep++ {
		before := len(placed)
		s := &sweeper{runner: runner, opts: opts, candidates: candidates, placed: placed, classes: map[string]*classState{}, checks: checks}
		var err error
		if rest, err = s.sweep(ctx, rest, sweep > 0); err != nil {
			return nil, nil, err
		}
		if len(placed) == before || len(rest) == 0 {
			break
		}
	}
	return rest, placed, nil
}

// NumFeasibleNodesToFind is how many feasible nodes the scheduler looks
// for among n with the default percentageOfNodesToScore (adaptive): all
// below 100 nodes, else 50% less a point per 125 nodes, at least 5% and
// at least 100 nodes.
func NumFeasibleNodesToFind(n int) int {
	const minFeasible, minPercent = 100, 5
	if n < minFeasible {
		return n
	}
	pct := max(50-n/125, minPercent)
	return max(n*pct/100, minFeasible)
}

// classState is what one sweep knows about a class.
type classState struct {
	hopeless bool
	// closed holds, by candidate index, the nodes closed to the class
	// (nil until the first); nClosed counts them. Scans from the last
	// one read it by index, without hashing a name per node.
	closed  []bool
	nClosed int
	// open are the candidates not closed, rebuilt when stale (some of
	// it closed since: closedSince nodes).
	open        []string
	stale       bool
	closedSince int
	fits        map[string]memoFit // memoizable classes only
	// byKey holds the verdicts per node key (see Options.Keys), for
	// memoizable, keyable classes only; each stands while the snapshot's
	// shared generation is the one it was found at.
	byKey map[string]keyVerdict
	// placements holds, per node key, a placement of a pod of the class
	// on a node with that key (Options.Copier), with the shared
	// generation it was made at.
	placements map[string]keptPlacement
	// last is the class's last scan, the next one's start (scanFrom);
	// spare is storage for the next.
	last, spare *scanResult
}

type keptPlacement struct {
	p      *estimator.NodePlacement
	shared uint64
}

// memoFit is a node a memoizable class fits at gen, and the node's key
// there (Options.Keys; "" without), read back by firstOfKeys without
// asking Keys again.
type memoFit struct {
	gen snapshot.Gen
	key string
}

type keyVerdict struct {
	fits   bool
	shared uint64
}

// close closes node to cs.
func (s *sweeper) close(cs *classState, node string) {
	i, ok := s.indexOf(node)
	if !ok {
		return
	}
	if cs.closed == nil {
		cs.closed = make([]bool, len(s.candidates))
	}
	if !cs.closed[i] {
		cs.closed[i], cs.stale = true, true
		cs.closedSince++
		cs.nClosed++
	}
}

// isClosed reports whether node is closed to cs.
func (s *sweeper) isClosed(cs *classState, node string) bool {
	if cs == nil || cs.nClosed == 0 {
		return false
	}
	i, ok := s.indexOf(node)
	return ok && cs.closed[i]
}

// closedAt reports whether the candidate at index i is closed to cs.
func (cs *classState) closedAt(i int) bool {
	return cs != nil && cs.nClosed > 0 && cs.closed[i]
}

type sweeper struct {
	runner     *framework.Runner
	opts       Options
	candidates []string
	placed     map[*corev1.Pod]string
	classes    map[string]*classState
	// reps lists what a keyed class's first scan filters (reps.go).
	reps keyReps
	// changes lists the nodes pods were placed on, in order; epoch
	// counts the times memoised verdicts were voided (scanStamp).
	changes []string
	epoch   int
	// positions holds the candidates' indexes (index).
	positions map[string]int
	// scratch is reused from pod to pod: one pod's scan lists hundreds
	// of nodes, and thousands of pods made these a third of the stage's
	// allocations.
	scratch scratch
	// checks says which decisions are checked (shared by the sweeps);
	// copied tells that the last decision copied a placement.
	checks *checks
	copied bool
}

// scratch holds buffers valid while one pod is fitted.
type scratch struct {
	fits, asked, seen     map[string]bool
	walk                  scanResult
	first, others, unsamp []string
	// tries is the ranked nodes followed by their alike ones.
	tries []string
	redo  []int
}

// reuse empties m (made on first use) for another pod.
func reuse(m *map[string]bool) map[string]bool {
	if *m == nil {
		*m = map[string]bool{}
	}
	clear(*m)
	return *m
}

// sweep tries pods in order, recording fits in placed, and returns the
// rest in order. A retry tries only the pods that are always tried.
func (s *sweeper) sweep(ctx context.Context, pods []*corev1.Pod, retry bool) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	var rest []*corev1.Pod
	for _, pod := range pods {
		class := s.opts.ClassOf(pod)
		if retry && class != "" {
			rest = append(rest, pod)
			continue
		}
		var cs *classState
		if class != "" {
			if cs = s.classes[class]; cs == nil {
				cs = &classState{open: s.candidates}
				if s.opts.Memoizable != nil && s.opts.Memoizable(pod) {
					cs.fits = map[string]memoFit{}
					if s.opts.Keys != nil && s.opts.Keys.Keyable(pod) {
						cs.byKey = map[string]keyVerdict{}
						cs.placements = map[string]keptPlacement{}
					}
				}
				s.classes[class] = cs
			}
		}
		node, err := s.checked(ctx, pod, class, cs)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if node == "" {
			if cs != nil {
				cs.hopeless = true
			}
			rest = append(rest, pod)
			continue
		}
		s.placed[pod] = node
		s.changes = append(s.changes, node)
		if cs == nil || cs.fits == nil {
			// The pod may change what other nodes accept (inter-pod
			// anti-affinity, a shared claim): known fits are void.
			s.epoch++
			for _, c := range s.classes {
				clear(c.fits)
				clear(c.byKey)
				clear(c.placements)
			}
		}
		logger.V(4).Info("Pod fits existing or upcoming capacity", "pod", klog.KObj(pod), "node", node)
	}
	return rest, nil
}

// decide places pod on a node and returns it, "" when it fits nowhere:
// at once for a pod of a class found hopeless.
func (s *sweeper) decide(ctx context.Context, pod *corev1.Pod, cs *classState) (string, error) {
	s.copied = false
	if cs != nil && cs.hopeless {
		return "", nil
	}
	return s.fit(ctx, pod, cs)
}

// fit places pod on a node and returns it, "" when it fits nowhere. cs is
// its class's state, nil for pods always tried.
func (s *sweeper) fit(ctx context.Context, pod *corev1.Pod, cs *classState) (string, error) {
	open := s.candidates
	if cs != nil {
		if s.opts.Rank == nil && len(cs.byKey) > 0 {
			// Ranking scans for keys (feasible); first fit closes the
			// nodes a key rules out before it asks.
			for _, n := range cs.open {
				if fits, known, _ := s.byKey(cs, n); known && !fits {
					s.close(cs, n)
				}
			}
		}
		// Ranking skips closed nodes as it scans, so it rebuilds open only
		// once an eighth of it is closed: one pod placed closes about one
		// node, and rebuilding 5,000 names per pod was a tenth of the stage.
		if cs.stale && (s.opts.Rank == nil || cs.closedSince*8 >= len(cs.open)) {
			cs.open = slices.DeleteFunc(slices.Clone(cs.open), func(n string) bool { return s.isClosed(cs, n) })
			cs.stale, cs.closedSince = false, 0
		}
		open = cs.open
	}
	if s.opts.Rank == nil {
		return s.firstFit(ctx, pod, cs, open)
	}
	feasible, keys, unsampled, err := s.feasible(ctx, pod, cs, open)
	if err != nil {
		return "", err
	}
	if len(feasible) > 0 {
		reps, alike := feasible, []string(nil)
		if cs != nil && cs.byKey != nil {
			reps, alike = s.firstOfKeys(feasible, keys)
		}
		order, err := s.opts.Rank(ctx, pod, reps)
		if err != nil {
			return "", err
		}
		tries := append(append(s.scratch.tries[:0], order...), alike...)
		node, err := s.firstFit(ctx, pod, cs, tries)
		s.scratch.tries = tries[:0]
		if node != "" || err != nil {
			return node, err
		}
	}
	// Reserve turned down every ranked node (or none was found): the
	// nodes not filtered are still to try.
	return s.firstFit(ctx, pod, cs, unsampled())
}

// firstOfKeys splits nodes into the first node of each key (and every
// node without one) and the others. Nodes with equal keys are in the same
// state, so a ranking scores them alike and, on a tie, prefers the
// earlier: ranking only the first of each key picks the same node at a
// fraction of the cost (5,000 nodes come in a few kinds and states).
// keys are the nodes' keys, in order.
func (s *sweeper) firstOfKeys(nodes, keys []string) (first, others []string) {
	seen := reuse(&s.scratch.seen)
	first, others = s.scratch.first[:0], s.scratch.others[:0]
	defer func() { s.scratch.first, s.scratch.others = first[:0], others[:0] }()
	for i, n := range nodes {
		k := keys[i]
		if k != "" && seen[k] {
			others = append(others, n)
			continue
		}
		seen[k] = k != ""
		first = append(first, n)
	}
	return first, others
}

// firstFit schedules pod on the first of nodes that takes it and closes
// the nodes that turned it down on the way.
func (s *sweeper) firstFit(ctx context.Context, pod *corev1.Pod, cs *classState, nodes []string) (string, error) {
	if len(nodes) == 0 {
		return "", nil
	}
	var info fwk.PodInfo
	if s.opts.PodInfo != nil {
		info = s.opts.PodInfo(pod)
	}
	copied, key, shared, err := s.copyPlacement(pod, info, cs, nodes[0])
	if err != nil {
		return "", err
	}
	if copied {
		s.copied = true
		return nodes[0], nil
	}
	var p *framework.ScheduleResult
	if info != nil {
		p, err = s.runner.SchedulePodInfoFirstFit(ctx, info, nodes)
	} else {
		p, err = s.runner.SchedulePodFirstFit(ctx, pod, nodes)
	}
	if err != nil {
		return "", err
	}
	if cs != nil {
		for _, r := range p.Results {
			if !r.Fits {
				s.close(cs, r.Node)
				s.learn(cs, r.Node, false)
			}
		}
	}
	if key != "" && p.Node == nodes[0] {
		// The node took the pod in the state its key names: so does every
		// node of that key (first fit learns nothing else of fits).
		cs.byKey[key] = keyVerdict{fits: true, shared: shared}
		if np, ok := s.opts.Copier.CapturePlacement(p.Pod, p.Node); ok {
			cs.placements[key] = keptPlacement{p: np, shared: shared}
		}
	}
	return p.Node, nil
}

// copyPlacement places pod on node by copying its class's placement on a
// node of node's key, when the class has one and node is known by its key
// to take the pod: the framework, asked, would place the pod on node (the
// first it is given) just so. Otherwise it returns node's key ("" when
// placements are not copied for the class) and the shared generation,
// for the framework's placement to be kept under.
func (s *sweeper) copyPlacement(pod *corev1.Pod, info fwk.PodInfo, cs *classState, node string) (copied bool, key string, shared uint64, err error) {
	if cs == nil || cs.placements == nil || s.opts.Copier == nil {
		return false, "", 0, nil
	}
	fits, known, key := s.byKey(cs, node)
	if key == "" {
		return false, "", 0, nil
	}
	shared = s.runner.Snapshot().NodeGen(node).Shared
	if kp, ok := cs.placements[key]; ok && known && fits && kp.shared == shared {
		if copied, err = s.opts.Copier.CopyPlacement(pod, info, kp.p, node); copied || err != nil {
			return copied, key, shared, err
		}
	}
	return false, key, shared, nil
}

// learn records node's verdict for its key, and returns the key.
func (s *sweeper) learn(cs *classState, node string, fits bool) string {
	if cs == nil || cs.byKey == nil {
		return ""
	}
	k := s.opts.Keys.Of(node)
	if k != "" {
		cs.byKey[k] = keyVerdict{fits: fits, shared: s.runner.Snapshot().NodeGen(node).Shared}
	}
	return k
}

// byKey returns the verdict node's key has (known is false without one),
// and the key.
func (s *sweeper) byKey(cs *classState, node string) (fits, known bool, key string) {
	if cs == nil || cs.byKey == nil {
		return false, false, ""
	}
	if key = s.opts.Keys.Of(node); key == "" {
		return false, false, ""
	}
	v, ok := cs.byKey[key]
	if !ok || v.shared != s.runner.Snapshot().NodeGen(node).Shared {
		return false, false, key
	}
	return v.fits, true, key
}

// feasible returns up to Sample nodes of open where pod fits, in open's
// order, and (to call only when needed) the open nodes it has no verdict
// for. Known fits (of a memoizable class while the node's generation
// holds, or of its node key) are taken without asking again, in open's
// order until there are Sample; the other nodes before that point (new
// to the class, or changed since) are filtered, so the nodes the last
// pods went to are ranked too. Without Sample known fits, the others are
// filtered until enough fit. Of nodes sharing a key not known yet, only
// the first is filtered; the next scan reads the others' verdict off it.
// keys are the feasible nodes' keys for a keyed class (see scan).
func (s *sweeper) feasible(ctx context.Context, pod *corev1.Pod, cs *classState, open []string) (feasible, keys []string, unsampled func() []string, err error) {
	fits := reuse(&s.scratch.fits) // verdicts of this call's filtering
	fresh := s.fresh(cs, open)
	for early := false; ; {
		var unknown []string
		if fresh {
			// A keyed class's first scan finds no verdict: it lists the
			// first node of each key and every node without one. The
			// sweep keeps that list (keyReps), so the class is asked
			// about them without walking every node, which for a class
			// that fits nowhere is all there is to it.
			fresh, unknown = false, s.reps.list(s)
			if verifyScans {
				s.verifyFresh(cs, open, unknown)
			}
		} else if feasible, keys, unknown = s.scan(cs, open, fits); len(unknown) == 0 || early {
			break
		}
		// Short of Sample, stop at enough fits; else filter every
		// unknown node before the Sample-th fit. A round that filtered
		// every unknown node is scanned again: nodes sharing a key with
		// them have a verdict now.
		var fitAny bool
		if fitAny, early, err = s.filter(ctx, pod, cs, unknown, s.opts.Sample-len(feasible), fits); err != nil {
			return nil, nil, nil, err
		}
		if !early && !fitAny && len(feasible) == 0 {
			// The scan found no fit and walked all of open (it stops only
			// at the Sample-th fit); each node it left open was filtered
			// or shares its key with one filtered, and none fits. Scanning
			// again would only close them one by one, and list none as
			// unsampled: for a class that fits nowhere (most classes in a
			// full cluster) those two walks were two thirds of its cost.
			if verifyScans {
				s.verifyNowhere(cs, open, fits)
			}
			return nil, nil, func() []string { return nil }, nil
		}
	}
	unsampled = s.unsampled(cs, open, fits, feasible)
	return feasible, keys, unsampled, nil
}

// filter asks the framework about unknown until enough fit, records the
// verdicts (in fits, the class's memo and its node keys) and reports
// whether any fits and whether it stopped before the end.
func (s *sweeper) filter(ctx context.Context, pod *corev1.Pod, cs *classState, unknown []string, enough int, fits map[string]bool) (fitAny, early bool, err error) {
	results, err := s.runner.FilterUntil(ctx, pod, unknown, enough)
	if err != nil {
		return false, false, err
	}
	snap := s.runner.Snapshot()
	for _, r := range results {
		key := s.learn(cs, r.Node, r.Fits)
		fits[r.Node] = r.Fits
		switch {
		case r.Fits && cs != nil && cs.fits != nil:
			cs.fits[r.Node] = memoFit{gen: snap.NodeGen(r.Node), key: key}
		case !r.Fits && cs != nil:
			s.close(cs, r.Node)
		}
		fitAny = fitAny || r.Fits
	}
	return fitAny, len(results) < len(unknown), nil
}

// verifyNowhere makes the scan and the listing a pod found to fit nowhere
// skips, and panics if they find a node.
func (s *sweeper) verifyNowhere(cs *classState, open []string, fits map[string]bool) {
	feasible, _, unknown := s.scan(cs, open, fits)
	rest := s.unsampled(cs, open, fits, feasible)()
	if len(feasible)+len(unknown)+len(rest) > 0 {
		panic(fmt.Sprintf("fitexisting: a pod found to fit nowhere has feasible %q, unknown %q, unsampled %q", feasible, unknown, rest))
	}
}

// unsampled returns the open nodes feasible leaves with no verdict, to
// call only when needed.
func (s *sweeper) unsampled(cs *classState, open []string, fits map[string]bool, feasible []string) func() []string {
	return func() []string {
		taken := reuse(&s.scratch.seen)
		for _, n := range feasible {
			taken[n] = true
		}
		rest := s.scratch.unsamp[:0]
		defer func() { s.scratch.unsamp = rest[:0] }()
		for _, n := range open {
			if f, seen := fits[n]; taken[n] || (seen && !f) || s.isClosed(cs, n) {
				continue
			}
			if f, known, _ := s.byKey(cs, n); known && !f {
				continue
			}
			rest = append(rest, n)
		}
		return rest
	}
}

// fitsKey is the key memoised with node's fit, "" without one.
func (cs *classState) fitsKey(node string) string {
	if cs == nil {
		return ""
	}
	return cs.fits[node].key
}
