// Package estimator answers "how many new nodes of this group would these
// pending pods need, and which pod would go where": a first-fit-decreasing
// binpacking over hypothetical nodes instantiated from the group's
// template, where every placement is the real scheduler framework's
// (simulator/framework) or an exact copy of one (see memo.go).
package estimator

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// Limit names, as reported in Estimate.Limited and Unplaced.Limit.
const (
	LimitMaxNodes    = "max-nodes"
	LimitMaxDuration = "max-duration"
)

// Options bound an estimate. Zero values mean no limit.
type Options struct {
	// MaxNodes caps the new nodes of one estimate.
	MaxNodes int
	// MaxDuration caps the time one estimate may take; pods not reached
	// in time are reported unplaced.
	MaxDuration time.Duration
	// DisableMemo turns off memoized verdicts and placement cloning, so
	// that every verdict comes from a framework call. For tests and for
	// ruling the optimisation out when debugging; results are identical.
	DisableMemo bool
	// DisableSharing estimates every group on its own, even where two
	// templates are the same to the filters (share.go). For tests.
	DisableSharing bool
	// Shortcuts turns shortcuts off (nil: all on): EstimateMemo (as
	// DisableMemo), SharedEstimate (as DisableSharing), EstimateClasses
	// (every pod tries every node, however its class fared) and Carry.
	Shortcuts *shortcut.Set
	// Check compares estimates with plain ones (check.go); nil: none.
	Check *shortcut.Checker
}

// Estimator runs binpacking estimates on a framework runner's snapshot. It
// is not safe for concurrent use (neither is the runner).
type Estimator struct {
	runner *framework.Runner
	opts   Options
	cache  *classCache
}

// New returns an estimator over runner's snapshot.
func New(runner *framework.Runner, opts Options) *Estimator {
	cache := newClassCache()
	cache.profile = runner.Profile()
	return &Estimator{runner: runner, opts: opts, cache: cache}
}

// WithLimits returns an estimator sharing e's runner and class cache but
// bounded by opts' MaxNodes and MaxDuration (the shortcuts and the check
// stay e's).
func (e *Estimator) WithLimits(opts Options) *Estimator {
	opts.DisableMemo, opts.DisableSharing, opts.Shortcuts, opts.Check = e.opts.DisableMemo, e.opts.DisableSharing, e.opts.Shortcuts, e.opts.Check
	return &Estimator{runner: e.runner, opts: opts, cache: e.cache}
}

// on reports whether shortcut n is on for e.
func (e *Estimator) on(n shortcut.Name) bool {
	switch {
	case n == shortcut.EstimateMemo && e.opts.DisableMemo, n == shortcut.SharedEstimate && e.opts.DisableSharing:
		return false
	}
	return e.opts.Shortcuts.On(n)
}

// UsePodInfos has e (and the estimators WithLimits made of it) take pods'
// PodInfos from podInfo, a cache the caller keeps across passes and
// shares with its other placements, instead of making its own; a nil
// result or one not made by the scheduler's NewPodInfo is made here.
func (e *Estimator) UsePodInfos(podInfo func(*v1.Pod) fwk.PodInfo) { e.cache.podInfo = podInfo }

// Estimate is the outcome of one estimate.
type Estimate struct {
	// NodeCount is the number of new nodes the placed pods need.
	NodeCount int
	// NewNodes names them, in opening order: "<group>-template-<i>" with
	// i counting from 0 and skipping names the snapshot already holds.
	NewNodes []string
	// Placements lists where each placed pod goes, in placement order.
	Placements []Placement
	// Unplaced lists the pods that got no node, in the order tried,
	// shared with the estimates carried or renamed from this one.
	Unplaced UnplacedPods
	// Limited names the limit that stopped the estimate ("" if none).
	Limited string
	// DevicesUsed counts the distinct devices of the new nodes' own
	// (template) slices that the placed pods' claims took.
	DevicesUsed int
	// FrameworkCalls counts scheduling cycles run through the framework;
	// MemoHits counts verdicts and placements reused instead (memo.go).
	FrameworkCalls, MemoHits int
	// group and maxNodes are the group estimated and the cap the
	// estimate ran with (0: none), for Carry.
	group    string
	maxNodes int
	// droppedNodes name the new nodes a class did not fit and that were
	// dropped again: the unplaced pods' verdicts were given there, so
	// Carry needs the names still free.
	droppedNodes []string
	// tookShared: a placement took a device that is not its node's own
	// (a slice bound to no node); nameRead: an unplaced class may read
	// the name of the node its verdict was given on. Either keeps Carry
	// from emptying the estimate (carry.go).
	tookShared, nameRead bool
	// seed is the estimate's memo for a kept estimate of the same group
	// (EstimateAndKeepFrom); carried along with the estimate, not renamed.
	seed *seed
}

// Placement is one pod on one new node.
type Placement struct {
	Pod  *v1.Pod
	Node string
}

// Unplaced is a pod without a node and why.
type Unplaced struct {
	Pod *v1.Pod
	// Result is the scheduler's verdict on an empty new node of the group
	// (a node the estimate then dropped again), when the pod's class does
	// not fit there; its Node is empty, the node being gone. Zero when a
	// limit stopped the pod. Never nil; the pods of a class share one, so
	// it must not be modified.
	Result *framework.NodeResult
	// Limit is LimitMaxNodes or LimitMaxDuration when a limit stopped the
	// pod, "" otherwise.
	Limit string
}

// noVerdict is the Result of the pods a limit stopped.
var noVerdict = &framework.NodeResult{}

// TemplateGroup is a node group to estimate: its name (new nodes are named
// "<name>-template-<i>"), the template of its nodes and, when positive,
// its own cap on new nodes in place of Options.MaxNodes (a group's room
// to grow).
type TemplateGroup struct {
	Name     string
	Template *cloudprovider.NodeTemplate
	MaxNodes int
}

// Estimate binpacks pods onto new nodes of tmpl's group and leaves the
// snapshot exactly as it found it. Errors are simulation failures (bad
// input, a plugin error), never "does not fit".
func (e *Estimator) Estimate(ctx context.Context, pods []*v1.Pod, tmpl *cloudprovider.NodeTemplate, group string) (*Estimate, error) {
	res, err := e.EstimateGroups(ctx, pods, []TemplateGroup{{Name: group, Template: tmpl}})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// EstimateGroups runs Estimate for each group in turn, sharing the work
// that does not depend on the group (classifying the pods), and returns
// the results in the groups' order.
// The snapshot is left exactly as it was.
func (e *Estimator) EstimateGroups(ctx context.Context, pods []*v1.Pod, groups []TemplateGroup) (_ []*Estimate, err error) {
	if err := e.check(groups); err != nil {
		return nil, err
	}
	results := make([]*Estimate, len(groups))
	if len(pods) == 0 {
		for i := range results {
			results[i] = &Estimate{}
		}
		return results, nil
	}
	start := time.Now()
	snap := e.runner.Snapshot()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("estimate: revert snapshot: %w", rerr)
		}
	}()
	order, err := e.cache.classify(snap, pods, true)
	if err != nil {
		return nil, fmt.Errorf("estimate: %w", err)
	}
	var share *sharing
	if e.on(shortcut.SharedEstimate) && len(groups) > 1 {
		if share, err = newSharing(snap, e.runner.Profile(), pods, true, &e.cache.cluster); err != nil {
			return nil, fmt.Errorf("estimate: %w", err)
		}
	}
	calls, shared := 0, 0
	first := map[string]int{}
	sharedFrom := make([]int, len(groups)) // the group a result was renamed from; -1: its own
	for i, g := range groups {
		sharedFrom[i] = -1
		key, err := share.key(g, e.maxNodes(g), e.cache)
		if err != nil {
			return nil, fmt.Errorf("estimate: %w", err)
		}
		if j, ok := first[key]; ok && key != "" {
			if res, ok := renamed(results[j], groups[j].Name, g.Name, snap); ok {
				results[i], shared, sharedFrom[i] = res, shared+1, j
				continue
			}
		}
		if results[i], err = e.estimate(ctx, order, g, false); err != nil {
			return nil, err
		}
		if _, ok := first[key]; !ok && key != "" {
			first[key] = i
		}
		calls += results[i].FrameworkCalls
	}
	klog.FromContext(ctx).V(2).Info("Estimated node groups", "groups", len(groups), "shared", shared, "pods", len(pods),
		"classes", len(order.classes), "frameworkCalls", calls, "duration", time.Since(start))
	if err := e.checkGroups(ctx, order, groups, results, sharedFrom); err != nil {
		return nil, err
	}
	return results, nil
}

// EstimateAndKeep is Estimate, but the new nodes, their pods and the claim
// allocations stay in the snapshot (in the current fork level, if any),
// so that a planner can go on from the chosen option. Its result is the
// one Estimate gives for the same input.
func (e *Estimator) EstimateAndKeep(ctx context.Context, pods []*v1.Pod, tmpl *cloudprovider.NodeTemplate, group string) (*Estimate, error) {
	return e.EstimateAndKeepFrom(ctx, nil, pods, tmpl, group)
}

// EstimateAndKeepFrom is EstimateAndKeep where from, an estimate of the
// same group and template (nil: none), still holds on the snapshot as it
// is now: made on it, or carried to it by Carry. The verdicts from's
// estimate learnt answer the kept one's without the framework (memo.go,
// seed); the result is the same.
func (e *Estimator) EstimateAndKeepFrom(ctx context.Context, from *Estimate, pods []*v1.Pod, tmpl *cloudprovider.NodeTemplate, group string) (*Estimate, error) {
	g := TemplateGroup{Name: group, Template: tmpl}
	if err := e.check([]TemplateGroup{g}); err != nil {
		return nil, err
	}
	order, err := e.cache.classify(e.runner.Snapshot(), pods, false)
	if err != nil {
		return nil, fmt.Errorf("estimate for group %s: %w", group, err)
	}
	plain, err := e.plainBefore(ctx, order, g)
	if err != nil {
		return nil, err
	}
	var s *seed
	if from != nil && from.group == group && from.seed != nil && from.seed.tmpl == tmpl {
		s = from.seed
	}
	res, err := e.estimateFrom(ctx, order, g, true, s)
	if err != nil {
		return nil, err
	}
	e.compare(plain, res, g, "estimate", []shortcut.Name{shortcut.EstimateMemo, shortcut.EstimateClasses})
	return res, nil
}

// maxNodes is the cap on g's new nodes: its own, else the estimator's.
func (e *Estimator) maxNodes(g TemplateGroup) int {
	if g.MaxNodes > 0 {
		return g.MaxNodes
	}
	return e.opts.MaxNodes
}

func (e *Estimator) check(groups []TemplateGroup) error {
	if e == nil || e.runner == nil {
		return fmt.Errorf("estimate: estimator without a framework runner")
	}
	for _, g := range groups {
		if g.Name == "" {
			return fmt.Errorf("estimate: node group without a name")
		}
		if g.Template == nil || g.Template.Node == nil {
			return fmt.Errorf("estimate for group %s: template without a node", g.Name)
		}
	}
	return nil
}

// estimate runs one group's binpacking in a fork of its own, reverted or
// (keep) committed.
func (e *Estimator) estimate(ctx context.Context, order *ordering, g TemplateGroup, keep bool) (res *Estimate, err error) {
	return e.estimateFrom(ctx, order, g, keep, nil)
}

// estimateFrom is estimate with the memo sown from s (nil: none).
func (e *Estimator) estimateFrom(ctx context.Context, order *ordering, g TemplateGroup, keep bool, s *seed) (res *Estimate, err error) {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", g.Name)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	snap := e.runner.Snapshot()
	snap.Fork()
	defer func() {
		end := snap.Revert
		if keep && err == nil {
			end = snap.Commit
		}
		if eerr := end(); eerr != nil && err == nil {
			res, err = nil, fmt.Errorf("estimate for group %s: close snapshot fork: %w", g.Name, eerr)
		}
	}()
	order.reset()
	r := &run{
		ctx:   ctx,
		e:     e,
		snap:  snap,
		tmpl:  g.Template,
		group: g.Name,
		res:   &Estimate{group: g.Name},
		// Once per estimate, not per node.
		requestSize: requestSize(g.Template),
		memo:        newMemo(e.on(shortcut.EstimateMemo)),
		lazy:        !keep,
		// Without the class shortcut every pod tries every node.
		perPod: !e.on(shortcut.EstimateClasses),
	}
	r.memo.sow(s, order.classes)
	r.maxNodes = e.maxNodes(g)
	r.res.maxNodes = r.maxNodes
	if e.opts.MaxDuration > 0 {
		r.deadline = start.Add(e.opts.MaxDuration)
	}
	if err := r.binpack(ctx, order); err != nil {
		return nil, fmt.Errorf("estimate for group %s: %w", g.Name, err)
	}
	r.res.NodeCount = len(r.res.NewNodes)
	for _, n := range r.nodes {
		r.res.DevicesUsed += len(n.used)
	}
	r.res.FrameworkCalls, r.res.MemoHits = r.calls, r.memo.hits
	if !keep {
		r.res.seed = r.seedOf(order.classes)
	}
	logger.V(4).Info("Estimated node group", "pods", len(order.pods), "classes", len(order.classes),
		"newNodes", r.res.NodeCount, "unplaced", r.res.Unplaced.Len(), "limited", r.res.Limited,
		"frameworkCalls", r.calls, "memoHits", r.memo.hits, "duration", time.Since(start))
	return r.res, nil
}

// binpack places pods in first-fit-decreasing order: each pod tries the
// nodes still open to its class, in opening order, then a new node.
func (r *run) binpack(ctx context.Context, order *ordering) error {
	r.order = order.pods
	for i, pod := range order.pods {
		r.at = i
		cls := order.classOf[i]
		if !r.deadline.IsZero() && time.Now().After(r.deadline) {
			r.res.Limited = LimitMaxDuration
			r.res.Unplaced.addRun(order.pods[i:], noVerdict, LimitMaxDuration)
			return nil
		}
		if cls.unplaceable != nil && !r.perPod && !cls.fitsLater {
			r.unplaced(pod, cls.unplaceable, "")
			continue
		}
		if !r.memo.usable(cls) {
			// The framework decides this pod alone and may look at
			// every node: show it the whole estimate.
			if err := r.materializeAll(); err != nil {
				return err
			}
		}
		if err := r.place(ctx, order.infos[i], cls); err != nil {
			return err
		}
	}
	return nil
}
