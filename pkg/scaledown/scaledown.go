// Package scaledown is the loop's scale-down stage: after scale-up, it
// asks the planner which nodes are unneeded and, outside the cooldowns
// that follow a scale-up, a deletion or a failure, hands the chosen ones
// to the actuator. It reports what it found in metrics and events, bad
// input included, and never stops the loop.
package scaledown

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/actuator"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/eligibility"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/planner"
)

// warnEvery is how often the same bad input is evented again.
const warnEvery = 10 * time.Minute

// Controller is the scale-down stage; it lives across passes.
type Controller struct {
	opts         config.ScaleDownOptions
	scanInterval time.Duration
	planner      *planner.RemovalPlanner
	actuator     *actuator.Remover
	client       kubernetes.Interface
	recorder     record.EventRecorder
	metrics      *metrics.ScaleDownMetrics
	// gate is asked about every removal the plan chose (nil: none).
	gate *safety.Gate

	lastScaleUp, lastDelete, lastFailure time.Time
	cleaned                              bool
	warned                               map[warnKey]time.Time
}

type warnKey struct {
	uid    types.UID
	reason string
}

// New returns the stage.
func New(opts config.ScaleDownOptions, scanInterval time.Duration, p *planner.RemovalPlanner, a *actuator.Remover,
	client kubernetes.Interface, recorder record.EventRecorder, m *metrics.ScaleDownMetrics) *Controller {
	return &Controller{opts: opts, scanInterval: scanInterval, planner: p, actuator: a, client: client, recorder: recorder,
		metrics: m, warned: map[warnKey]time.Time{}}
}

// groupOptions sets rg's thresholds and times from the options group g
// runs with (nodegroups.ResolveOptions: upstream's per-group options, a
// Cluster API MachineDeployment's autoscaling-options annotations, a gRPC
// server's NodeGroupGetOptions) when its provider set them; otherwise the
// planner keeps the flags' values.
func (s *Controller) groupOptions(g *nodegroups.Info, rg *planner.RemovalGroup) {
	if g.OptionsFrom != nodegroups.OptionsFromProvider {
		return
	}
	rg.Whole = g.Options.ZeroOrMaxNodeScaling
	o := g.Options
	if o.ScaleDownUtilizationThreshold != s.opts.UtilizationThreshold || o.ScaleDownGpuUtilizationThreshold != s.opts.GPUUtilizationThreshold {
		rg.Thresholds = &eligibility.Thresholds{Utilization: o.ScaleDownUtilizationThreshold, GPU: o.ScaleDownGpuUtilizationThreshold}
	}
	rg.UnneededTime, rg.UnreadyTime = o.ScaleDownUnneededTime, o.ScaleDownUnreadyTime
}

// WithGate has the stage ask g before it removes a node.
func (s *Controller) WithGate(g *safety.Gate) *Controller {
	s.gate = g
	return s
}

// InFlight is how many removals started earlier are still under way.
func (s *Controller) InFlight() int {
	deleting, _ := s.actuator.Deleting()
	return len(deleting)
}

// Wait blocks until the removals under way have ended (they end with
// the context they were started with): for shutdown and handover.
func (s *Controller) Wait() { s.actuator.Wait() }

// NoteScaleUp starts the cooldown after a scale-up.
func (s *Controller) NoteScaleUp(at time.Time) {
	if at.After(s.lastScaleUp) {
		s.lastScaleUp = at
	}
}

// ControllerInput is what one pass hands the stage.
type ControllerInput struct {
	State *observe.ClusterState
	PDBs  PDBLister
	// Owners tells whether pods' controllers exist (nil: not checked).
	Owners drainability.OwnerLookup
	Groups []*nodegroups.Info
	// Nodes are the registered nodes in the snapshot.
	Nodes []string
	// Policies are this pass's rules that may keep nodes or order
	// removals (its reservations count).
	Policies []planner.NodePolicy
	Now      time.Time
}

// PDBLister lists the PodDisruptionBudgets (the observer does).
type PDBLister interface {
	PodDisruptionBudgets() ([]*policyv1.PodDisruptionBudget, error)
}

// PassResult is what the stage did, for tests and the status.
type PassResult struct {
	Plan *planner.RemovalPlan
	// Cooldown names the cooldown that held removals back, if any.
	Cooldown string
	Started  []string
	// Refused are the planned removals the safety gate refused.
	Refused []safety.Refusal
}

// Run is one pass of scale-down.
func (s *Controller) Run(ctx context.Context, in ControllerInput) (*PassResult, error) {
	logger := klog.FromContext(ctx)
	if !s.opts.Enabled {
		return &PassResult{}, nil
	}
	s.collect()
	if !s.cleaned {
		s.cleanLeftoverTaints(ctx, in.Groups)
		s.cleaned = true
	}
	pdbs, err := in.PDBs.PodDisruptionBudgets()
	if err != nil {
		return nil, fmt.Errorf("scale-down: list PodDisruptionBudgets: %w", err)
	}
	deleting, drains := s.actuator.Deleting()
	pin := planner.RemovalInput{
		Pods: in.State.Pods, PodsByNode: map[string][]*corev1.Pod{}, PDBs: pdbs, PodGroups: in.State.PodGroups,
		CompositePodGroups: in.State.CompositePodGroups,
		Deleting:           deleting, InFlightDrains: drains, Owners: in.Owners, Policies: in.Policies, Now: in.Now,
	}
	for _, p := range in.State.Pods {
		if p.Spec.NodeName != "" {
			pin.PodsByNode[p.Spec.NodeName] = append(pin.PodsByNode[p.Spec.NodeName], p)
		}
	}
	byGroup := map[string]cloudprovider.NodeGroup{}
	booting := map[string]bool{}
	for _, g := range in.Groups {
		byGroup[g.Id] = g.Group
		nodes := append([]*corev1.Node(nil), g.Ready...)
		for _, n := range g.Booting {
			booting[n.Name] = true
			// Not ready (rather than ready without its devices yet): the
			// planner decides, with --scale-down-unready-*.
			if !eligibility.IsReady(n) {
				nodes = append(nodes, n)
			}
		}
		rg := planner.RemovalGroup{Id: g.Id, Min: g.Min, Size: g.Size(), Nodes: nodes}
		if n, _ := g.Template.UnitSize(); n > 1 && !s.opts.PartialUnits {
			rg.Units = map[string]string{}
			for _, node := range slices.Concat(g.Ready, g.Booting) {
				rg.Units[node.Name] = g.Template.UnitOf(node)
			}
		}
		s.groupOptions(g, &rg)
		pin.Groups = append(pin.Groups, rg)
	}
	tainted := map[string]bool{}
	for _, n := range in.State.Nodes {
		if eligibility.HasToBeDeletedTaint(n) || n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			tainted[n.Name] = true
		}
	}
	for _, n := range in.Nodes {
		if !booting[n] && !deleting[n] && !tainted[n] {
			pin.Destinations = append(pin.Destinations, n)
		}
	}
	plan, err := s.planner.Plan(ctx, pin)
	if err != nil {
		return nil, err
	}
	s.report(logger, plan, in.Now)
	res := &PassResult{Plan: plan}
	if res.Cooldown = s.cooldown(in.Now); res.Cooldown != "" {
		if len(plan.Empty)+len(plan.Drain) > 0 {
			logger.V(2).Info("Scale-down in cooldown; no node removed", "cooldown", res.Cooldown, "removable", len(plan.Empty)+len(plan.Drain))
		}
		return res, nil
	}
	var empty, drained []actuator.Deletion
	allowed := func(r planner.Removal, isEmpty bool) bool {
		refusal := s.gate.Allow(safety.ActionScaleDown, safety.Target{Group: r.Group, Node: r.Node, Empty: isEmpty})
		if refusal != nil {
			res.Refused = append(res.Refused, *refusal)
			logger.Info("Not removing an unneeded node: the safety gate refused", "node", r.Node.Name, "nodeGroup", r.Group, "rule", refusal.Rule, "detail", refusal.Detail)
		}
		return refusal == nil
	}
	for _, r := range plan.Empty {
		if !allowed(r, true) {
			continue
		}
		empty = append(empty, actuator.Deletion{Node: r.Node, Group: byGroup[r.Group]})
		res.Started = append(res.Started, r.Node.Name)
		logger.Info("Removing empty node", "node", r.Node.Name, "nodeGroup", r.Group, "utilization", r.Utilization.String())
	}
	for _, r := range plan.Drain {
		if !allowed(r, false) {
			continue
		}
		drained = append(drained, actuator.Deletion{Node: r.Node, Group: byGroup[r.Group], Evict: r.Evict})
		res.Started = append(res.Started, r.Node.Name)
		logger.Info("Draining and removing node", "node", r.Node.Name, "nodeGroup", r.Group, "utilization", r.Utilization.String(), "moves", r.Moves)
	}
	for _, o := range s.actuator.Start(ctx, empty, drained) {
		s.record(o)
	}
	return res, nil
}

// cooldown names the cooldown in force at now, or "".
func (s *Controller) cooldown(now time.Time) string {
	switch {
	case !s.lastScaleUp.IsZero() && now.Before(s.lastScaleUp.Add(s.opts.DelayAfterAdd)):
		return "scale-down-delay-after-add"
	case !s.lastDelete.IsZero() && now.Before(s.lastDelete.Add(s.opts.DelayAfterDeleteOr(s.scanInterval))):
		return "scale-down-delay-after-delete"
	case !s.lastFailure.IsZero() && now.Before(s.lastFailure.Add(s.opts.DelayAfterFailure)):
		return "scale-down-delay-after-failure"
	}
	return ""
}

// collect takes in the removals that ended since the last pass.
func (s *Controller) collect() {
	for _, o := range s.actuator.Collect() {
		s.record(o)
	}
}

func (s *Controller) record(o actuator.RemovalOutcome) {
	if o.Err != nil {
		s.metrics.FailedScaleDowns.WithLabelValues(o.Stage).Inc()
		if o.At.After(s.lastFailure) {
			s.lastFailure = o.At
		}
		return
	}
	reason := metrics.ScaleDownUnderutilized
	if o.Empty {
		reason = metrics.ScaleDownEmpty
	}
	s.metrics.ScaledDownNodes.WithLabelValues(reason).Inc()
	if o.At.After(s.lastDelete) {
		s.lastDelete = o.At
	}
}

// report sets the gauges and events the warnings, each at most once per
// warnEvery and object.
func (s *Controller) report(logger klog.Logger, plan *planner.RemovalPlan, now time.Time) {
	s.metrics.UnneededNodes.Set(float64(len(plan.Unneeded)))
	s.metrics.UnremovableNodes.Reset()
	for _, u := range plan.Unremovable {
		s.metrics.UnremovableNodes.WithLabelValues(u.Reason).Inc()
	}
	for _, w := range plan.Warnings {
		m, ok := w.Object.(interface{ GetUID() types.UID })
		if !ok {
			continue
		}
		k := warnKey{uid: m.GetUID(), reason: w.Reason}
		if last, seen := s.warned[k]; seen && now.Sub(last) < warnEvery {
			continue
		}
		s.warned[k] = now
		logger.Info("Bad input found by scale-down", "reason", w.Reason, "message", w.Message)
		s.recorder.Event(w.Object, corev1.EventTypeWarning, w.Reason, w.Message)
	}
	for k, last := range s.warned {
		if now.Sub(last) >= warnEvery {
			delete(s.warned, k)
		}
	}
}

// cleanLeftoverTaints takes the deletion taint off the nodes of our groups
// that a previous process left it on (it stopped mid-removal): nobody
// removes them now, and the taint would keep pods off them forever. Nodes
// of other groups are not ours to judge.
func (s *Controller) cleanLeftoverTaints(ctx context.Context, groups []*nodegroups.Info) {
	deleting, _ := s.actuator.Deleting()
	var names []string
	for _, g := range groups {
		for _, n := range append(append([]*corev1.Node(nil), g.Ready...), g.Booting...) {
			if eligibility.HasToBeDeletedTaint(n) && !deleting[n.Name] && n.DeletionTimestamp == nil {
				names = append(names, n.Name)
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if err := drain.Untaint(ctx, s.client, name); err != nil {
			klog.FromContext(ctx).Error(err, "Could not remove a leftover deletion taint", "node", name)
			continue
		}
		klog.FromContext(ctx).Info("Removed a leftover deletion taint", "node", name)
	}
}
