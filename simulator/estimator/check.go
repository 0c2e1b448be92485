package estimator

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// Checking estimates against plain ones (docs/design/caches.md).
//
// A plain estimate is one without a shortcut: no memo, no clone, no
// virtual node, every pod on every node, every group alone. Where the
// check is sampled (the shadow check) it is made over the first pods of
// the estimate's order only: first-fit decreasing places each pod as the
// pods before it left the nodes, so the estimate of a prefix of the order
// is the full estimate's placements of that prefix (not for estimates a
// deadline cut short, which are never checked).

// plainEstimate is the estimate of pods (the first n of order, n 0: all)
// for g with every shortcut off. The snapshot is left as it was.
func (e *Estimator) plainEstimate(ctx context.Context, order *ordering, n int, g TemplateGroup) (*Estimate, []*v1.Pod, error) {
	pods := order.pods
	if n > 0 && n < len(pods) {
		pods = pods[:n]
	}
	plain := &Estimator{runner: e.runner, opts: Options{MaxNodes: e.opts.MaxNodes, Shortcuts: shortcut.Plain()}, cache: newClassCache()}
	res, err := plain.EstimateGroups(ctx, pods, []TemplateGroup{g})
	if err != nil {
		return nil, nil, fmt.Errorf("plain estimate: %w", err)
	}
	return res[0], pods, nil
}

// checked is a plain estimate to compare a shortcut's with, over the
// pods it covers.
type checked struct {
	plain *Estimate
	pods  []*v1.Pod
}

// checkGroups checks the estimates of groups the pass's budget allows
// (every group in verify mode, else one picked at random).
func (e *Estimator) checkGroups(ctx context.Context, order *ordering, groups []TemplateGroup, results []*Estimate, sharedFrom []int) error {
	check := e.opts.Check
	ok, n := check.Estimate()
	if !ok {
		return nil
	}
	picked := []int{check.Pick(len(groups))}
	if check.Verify {
		picked = picked[:0]
		for i := range groups {
			picked = append(picked, i)
		}
	}
	for _, i := range picked {
		if results[i].Limited == LimitMaxDuration {
			continue
		}
		plain, pods, err := e.plainEstimate(ctx, order, n, groups[i])
		if err != nil {
			return err
		}
		suspects := []shortcut.Name{shortcut.EstimateMemo, shortcut.EstimateClasses}
		if sharedFrom[i] >= 0 {
			suspects = []shortcut.Name{shortcut.SharedEstimate}
		}
		e.compare(&checked{plain: plain, pods: pods}, results[i], groups[i], "estimate", suspects)
	}
	return nil
}

// plainBefore is, when the budget allows checking EstimateAndKeep's
// estimate, the plain estimate made before it keeps anything; nil
// otherwise.
func (e *Estimator) plainBefore(ctx context.Context, order *ordering, g TemplateGroup) (*checked, error) {
	ok, n := e.opts.Check.Estimate()
	if !ok {
		return nil, nil
	}
	plain, pods, err := e.plainEstimate(ctx, order, n, g)
	if err != nil {
		return nil, err
	}
	return &checked{plain: plain, pods: pods}, nil
}

// CheckCarried checks, when the budget allows, an estimate Carry gave
// for pods against a plain estimate of them.
func (e *Estimator) CheckCarried(ctx context.Context, pods []*v1.Pod, g TemplateGroup, carried *Estimate) error {
	ok, n := e.opts.Check.Estimate()
	if !ok || carried.Limited == LimitMaxDuration {
		return nil
	}
	order, err := e.cache.classify(e.runner.Snapshot(), pods, false)
	if err != nil {
		return fmt.Errorf("check carried estimate: %w", err)
	}
	plain, covered, err := e.plainEstimate(ctx, order, n, g)
	if err != nil {
		return err
	}
	e.compare(&checked{plain: plain, pods: covered}, carried, g, "carry", []shortcut.Name{shortcut.Carry})
	return nil
}

// compare reports where got (a shortcut's estimate) differs from the
// plain one over the pods it covers. The shortcut blamed is the only
// suspect, or "" when several could be.
func (e *Estimator) compare(c *checked, got *Estimate, g TemplateGroup, kind string, suspects []shortcut.Name) {
	if c == nil || got == nil || got.Limited == LimitMaxDuration {
		return
	}
	e.opts.Check.Checked(kind)
	pod, gotSays, plainSays := diffEstimates(c.pods, got, c.plain)
	if pod == nil {
		return
	}
	var blamed shortcut.Name
	if len(suspects) == 1 {
		blamed = suspects[0]
	}
	e.opts.Check.Found(shortcut.Mismatch{Shortcut: blamed, Kind: kind, Pod: pod.Namespace + "/" + pod.Name,
		Class: e.ClassKey(pod), Group: g.Name, Got: gotSays, Want: plainSays})
}

// diffEstimates returns the first of pods whose fate differs between the
// two estimates, and what each says of it; nil when they agree.
func diffEstimates(pods []*v1.Pod, got, plain *Estimate) (*v1.Pod, string, string) {
	gotFate, plainFate := fates(got), fates(plain)
	for _, p := range pods {
		if g, w := gotFate[p], plainFate[p]; g != w {
			return p, g, w
		}
	}
	return nil, "", ""
}

// fates says per pod where an estimate put it, or why not.
func fates(res *Estimate) map[*v1.Pod]string {
	out := make(map[*v1.Pod]string, len(res.Placements)+res.Unplaced.Len())
	for _, p := range res.Placements {
		out[p.Pod] = "node " + p.Node
	}
	for u := range res.Unplaced.All() {
		switch {
		case u.Limit != "":
			out[u.Pod] = "unplaced (" + u.Limit + ")"
		default:
			out[u.Pod] = "unplaced (" + u.Result.Plugin + ")"
		}
	}
	return out
}
