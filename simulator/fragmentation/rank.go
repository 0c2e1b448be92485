package fragmentation

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Choice is one feasible node for a pod and what placing the pod there
// would do to the node's devices.
type Choice struct {
	Node string
	// Alternative is the lowest index of a prioritized-list alternative
	// the allocator chose on this node (0 when the pod has no
	// prioritized list): the scheduler's DynamicResources score prefers
	// nodes where earlier alternatives fit.
	Alternative int
	// StrandedAdded is Fraction(stranded after) minus Fraction(stranded
	// before): the fragmentation the placement adds (negative when it
	// uses capacity that was stranded).
	StrandedAdded float64
	// Consumed is the Fraction of the node's capacity the placement
	// takes: an alternative that takes less is preferred.
	Consumed float64
	// FreeAfter is Fraction(free after placement): smaller means a
	// tighter fit.
	FreeAfter float64
}

// RankOptions say how to order the feasible nodes.
type RankOptions struct {
	// Shapes are the request shapes stranded capacity is judged against;
	// the pod's own shape is added.
	Shapes []*Shape
	// AlternativeFirst ranks by Choice.Alternative before fragmentation,
	// as the scheduler's own scoring would.
	AlternativeFirst bool
	// Feasible says the caller has filtered the candidates and every one
	// fits (the framework's verdict): Rank does not filter them again.
	Feasible bool
}

// Rank orders the candidates where pod fits so that the placement adding
// the least fragmentation comes first: least stranded capacity added,
// then the least capacity taken (a prioritized list's smaller
// alternative), then the tightest fit (partly used devices before untouched ones), then
// the given order. Feasibility is the framework's Filter verdict
// (RunFilters); what a placement does is learnt from a probe with the
// pod's claims, memoised per node state. Nodes where the pod does not fit
// follow, in the given order, so the result can go to SchedulePod as it is.
// Pods without device claims are not ranked: candidates come back as given.
func (a *Analyzer) Rank(ctx context.Context, pod *v1.Pod, candidates []string, opts RankOptions) ([]string, []Choice, error) {
	a.uncached()
	shape, ok := ShapeOf(a.snap(), pod, false)
	if !ok || len(candidates) < 2 {
		return candidates, nil, nil
	}
	var results []framework.NodeResult
	if opts.Feasible {
		results = make([]framework.NodeResult, len(candidates))
		for i, n := range candidates {
			results[i] = framework.NodeResult{Node: n, Fits: true}
		}
	} else {
		var err error
		if results, err = a.runner.RunFilters(ctx, pod, candidates); err != nil {
			return nil, nil, fmt.Errorf("rank nodes for pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	shapes := withShape(opts.Shapes, shape)
	shapesID := shapesKey(shapes)
	var choices []Choice
	var rest []string
	for _, res := range results {
		if !res.Fits {
			rest = append(rest, res.Node)
			continue
		}
		c, fits, err := a.choice(ctx, res.Node, shape, shapes, shapesID)
		if err != nil {
			return nil, nil, err
		}
		if !fits {
			// The probe (devices only) disagrees with Filter, which saw
			// the pod itself; keep the node, rank it last of the fits.
			c = Choice{Node: res.Node, StrandedAdded: 2, Consumed: 2, FreeAfter: 2}
		}
		choices = append(choices, c)
	}
	order := map[string]int{}
	for i, n := range candidates {
		order[n] = i
	}
	slices.SortStableFunc(choices, func(x, y Choice) int {
		if opts.AlternativeFirst {
			if c := cmp.Compare(x.Alternative, y.Alternative); c != 0 {
				return c
			}
		}
		return cmp.Or(cmpFloat(x.StrandedAdded, y.StrandedAdded), cmpFloat(x.Consumed, y.Consumed), cmpFloat(x.FreeAfter, y.FreeAfter),
			cmp.Compare(order[x.Node], order[y.Node]))
	})
	ranked := make([]string, 0, len(candidates))
	for _, c := range choices {
		ranked = append(ranked, c.Node)
	}
	return append(ranked, rest...), choices, nil
}

// choice is what placing shape on node does: memoised per node state
// (choiceKey), learnt with a probe in a fork otherwise.
func (a *Analyzer) choice(ctx context.Context, node string, shape *Shape, shapes []*Shape, shapesID string) (_ Choice, fits bool, err error) {
	before, err := a.measure(node)
	if err != nil {
		return Choice{}, false, err
	}
	ck := choiceKey{before.key, shape.Key, shapesID}
	if m, ok := a.choices[ck]; ok {
		m.c.Node = node
		return m.c, m.fits, nil
	}
	c, fits, err := a.probeChoice(ctx, node, before, shape, shapes, shapesID)
	if err != nil {
		return Choice{}, false, err
	}
	if len(a.choices) >= maxMemo {
		a.choices = map[choiceKey]choiceMemo{}
	}
	m := choiceMemo{c: c, fits: fits}
	m.c.Node = ""
	a.choices[ck] = m
	return c, fits, nil
}

// probeChoice is choice learnt afresh: node, in state before, gets a probe
// of shape in a fork.
func (a *Analyzer) probeChoice(ctx context.Context, node string, before state, shape *Shape, shapes []*Shape, shapesID string) (_ Choice, fits bool, err error) {
	budget := a.ProbeBudget
	strandedBefore, err := a.leftover(ctx, node, before, shapes, shapesID, &budget)
	if err != nil {
		return Choice{}, false, err
	}
	snap := a.snap()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("node %s: revert trial: %w", node, rerr)
		}
	}()
	placed, err := a.probe(ctx, shape, node)
	if err != nil || !placed {
		return Choice{Node: node}, false, err
	}
	alternative := a.alternativeOf(a.seq)
	after, err := a.measure(node)
	if err != nil {
		return Choice{}, false, err
	}
	a.trans[transKey{before.key, shape.Key}] = transition{fits: true, next: after.key}
	strandedAfter, err := a.leftover(ctx, node, after, shapes, shapesID, &budget)
	if err != nil {
		return Choice{}, false, err
	}
	return Choice{
		Node:          node,
		Alternative:   alternative,
		StrandedAdded: Fraction(strandedAfter, before.total) - Fraction(strandedBefore, before.total),
		Consumed:      Fraction(before.free, before.total) - Fraction(after.free, before.total),
		FreeAfter:     Fraction(after.free, after.total),
	}, true, nil
}

// alternativeOf reads, from the claims of probe seq, the lowest
// prioritized-list alternative the allocator chose.
func (a *Analyzer) alternativeOf(seq int) int {
	best := -1
	for i := 0; ; i++ {
		c, ok := a.snap().ResourceClaim(ProbeNamespace, fmt.Sprintf("probe-%d-%d", seq, i))
		if !ok {
			break
		}
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if !resourceclaim.IsSubRequestRef(r.Request) {
				continue
			}
			parent, sub, _ := strings.Cut(r.Request, "/")
			if idx := subRequestIndex(c.Spec.Devices.Requests, parent, sub); idx >= 0 && (best < 0 || idx < best) {
				best = idx
			}
		}
	}
	return max(best, 0)
}

func withShape(shapes []*Shape, sh *Shape) []*Shape {
	if slices.ContainsFunc(shapes, func(s *Shape) bool { return s.Key == sh.Key }) {
		return shapes
	}
	out := append(slices.Clone(shapes), sh)
	SortShapes(out)
	return out
}

func cmpFloat(x, y float64) int {
	const eps = 1e-9
	switch {
	case x < y-eps:
		return -1
	case x > y+eps:
		return 1
	}
	return 0
}
