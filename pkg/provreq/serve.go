package provreq

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Event reasons beside the condition reasons.
const (
	EventBookingExpired  = "BookingExpired"
	EventCapacityRevoked = "CapacityRevoked"
)

// update is what serving one request decided: its new conditions, the
// events to send once they are written, the scale-up to launch (decided,
// not made yet) and, once launched, what came of it.
type update struct {
	conds   []metav1.Condition
	changed bool
	events  []event
	launch  *launch
	results []act.LaunchResult
}

// launch is a request's scale-up, planned all or nothing and booked in
// the snapshot by the deciding stage; the launching stage makes it.
type launch struct {
	ups  []act.ScaleUp
	pods int
	// usageBefore is the pass's usage before the plan took from it.
	usageBefore limits.Usage
}

type event struct{ typ, reason, message string }

func (u *update) set(pr *v1.ProvisioningRequest, in ProcessInput, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	c := metav1.Condition{Type: typ, Status: status, Reason: reason, Message: trim(msg),
		ObservedGeneration: pr.Generation, LastTransitionTime: metav1.NewTime(in.Now)}
	if apimeta.SetStatusCondition(&u.conds, c) {
		u.changed = true
		return true
	}
	return false
}

func (u *update) event(typ, reason, msg string) {
	u.events = append(u.events, event{typ, reason, trim(msg)})
}

// serve decides one request. bound is how many of its consumers are bound.
func (p *Processor) serve(ctx context.Context, pr *v1.ProvisioningRequest, in ProcessInput, bound int) *update {
	logger := klog.FromContext(ctx).WithValues("provisioningRequest", klog.KObj(pr), "class", pr.Spec.ProvisioningClassName)
	u := &update{conds: append([]metav1.Condition(nil), pr.Status.Conditions...)}
	if done(u.conds) {
		return u
	}
	u.set(pr, in, v1.Accepted, metav1.ConditionTrue, ReasonAccepted, MessageAccepted)
	pods, err := PodsFor(pr, p.templates, p.opts.MaxPods)
	if err != nil {
		var missing *MissingTemplateError
		var tooMany *TooManyPodsError
		if errors.As(err, &tooMany) {
			// Failed, not Provisioned=False: it will not fit the bound
			// later either, and Kueue tells the workload at once.
			logger.Info("ProvisioningRequest asks for too many pods; not simulated", "pods", tooMany.Pods, "max", tooMany.Max)
			if u.set(pr, in, v1.Failed, metav1.ConditionTrue, ReasonTooManyPods, err.Error()) {
				u.event(corev1.EventTypeWarning, ReasonTooManyPods, err.Error())
			}
			return u
		}
		if errors.As(err, &missing) && in.Now.Sub(pr.CreationTimestamp.Time) < p.opts.TemplateGrace {
			logger.V(2).Info("PodTemplate not there yet; waiting", "err", err)
			return u
		}
		if u.set(pr, in, v1.Failed, metav1.ConditionTrue, ReasonFailedToCreatePods, err.Error()) {
			u.event(corev1.EventTypeWarning, ReasonFailedToCreatePods, err.Error())
		}
		return u
	}
	if apimeta.IsStatusConditionTrue(u.conds, v1.Provisioned) {
		p.book(ctx, pr, in, pods, bound, u)
		return u
	}
	if in.Now.Sub(pr.CreationTimestamp.Time) > Expiration {
		if u.set(pr, in, v1.Failed, metav1.ConditionTrue, ReasonExpired, MessageExpired) {
			u.event(corev1.EventTypeWarning, ReasonExpired, fmt.Sprintf("not provisioned within %s", Expiration))
		}
		return u
	}
	if pr.Spec.ProvisioningClassName == v1.ProvisioningClassCheckCapacity {
		p.check(ctx, pr, in, pods, u)
	} else {
		p.scaleUp(ctx, pr, in, pods, u)
	}
	return u
}

// book holds a Provisioned request's capacity: its pods not consumed yet
// are placed in the snapshot, or, once the window is over, BookingExpired.
func (p *Processor) book(ctx context.Context, pr *v1.ProvisioningRequest, in ProcessInput, pods []*corev1.Pod, bound int, u *update) {
	logger := klog.FromContext(ctx).WithValues("provisioningRequest", klog.KObj(pr))
	since := apimeta.FindStatusCondition(u.conds, v1.Provisioned).LastTransitionTime.Time
	if !in.Now.Before(since.Add(p.opts.BookingDuration)) {
		delete(p.misses, pr.UID)
		if u.set(pr, in, v1.BookingExpired, metav1.ConditionTrue, ReasonCapacityReservationTimeExpired, MessageCapacityReservationExpired) {
			u.event(corev1.EventTypeNormal, EventBookingExpired, fmt.Sprintf("booking of %d pod(s) ended after %s", len(pods), p.opts.BookingDuration))
		}
		return
	}
	left := len(pods) - bound
	if left <= 0 {
		logger.V(4).Info("Booked capacity consumed", "pods", len(pods), "consumers", bound)
		delete(p.misses, pr.UID)
		return
	}
	ok, why, err := placeAll(ctx, in.Runner, pods[:left], in.Candidates)
	if err != nil {
		logger.Error(err, "Booking capacity failed")
		return
	}
	if ok {
		delete(p.misses, pr.UID)
		logger.V(4).Info("Capacity booked", "pods", left, "consumers", bound)
		return
	}
	if p.misses[pr.UID]++; p.misses[pr.UID] < revokeAfter {
		return
	}
	delete(p.misses, pr.UID)
	msg := "booked capacity is gone: " + why
	if u.set(pr, in, v1.CapacityRevoked, metav1.ConditionTrue, ReasonCapacityIsNotFound, msg) {
		u.event(corev1.EventTypeWarning, EventCapacityRevoked, msg)
	}
}

// check answers check-capacity from the simulation: all pods fit existing
// and upcoming nodes (and are then booked), or Provisioned=False says how
// far they got.
func (p *Processor) check(ctx context.Context, pr *v1.ProvisioningRequest, in ProcessInput, pods []*corev1.Pod, u *update) {
	ok, why, err := placeAll(ctx, in.Runner, pods, in.Candidates)
	switch {
	case err != nil:
		klog.FromContext(ctx).Error(err, "Checking capacity failed", "provisioningRequest", klog.KObj(pr))
		u.set(pr, in, v1.Provisioned, metav1.ConditionFalse, ReasonFailedToCheckCapacity, "Failed to check pre-existing capacity in the cluster: "+err.Error())
	case ok:
		if u.set(pr, in, v1.Provisioned, metav1.ConditionTrue, ReasonCapacityIsFound, MessageCapacityIsFound) {
			u.event(corev1.EventTypeNormal, ReasonCapacityIsFound, fmt.Sprintf("capacity for all %d pod(s) found in the cluster; booked for %s", len(pods), p.opts.BookingDuration))
		}
	default:
		msg := "Capacity is not found, CA will try to find it later: " + why
		if u.set(pr, in, v1.Provisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, msg) {
			u.event(corev1.EventTypeNormal, ReasonCapacityIsNotFound, msg)
		}
	}
}

// asGang is the request's pods as one gang, all of them or none. Where
// the cluster's scheduler has gangs (GenericWorkload), the gang gets a
// PodGroup of its own in the simulation (named after the request, which
// no PodGroup of the cluster is expected to be) and its pods name it, so
// the scheduler's pod group cycle plans it as it plans any gang.
func asGang(pr *v1.ProvisioningRequest, pods []*corev1.Pod) *gang.Gang {
	g := &gang.Gang{Namespace: pr.Namespace, Name: Kind + "/" + pr.Name, MinCount: len(pods), Pending: pods}
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		return g
	}
	for _, p := range pods {
		if p.Spec.SchedulingGroup != nil {
			return g // the template's own group: not ours to replace
		}
	}
	name := pr.Name + ".provisioningrequest"
	g.Group = &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: name, UID: pr.UID + "-podgroup"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(len(pods))}}}}
	g.Pending = make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		c := *p
		c.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &name}
		g.Pending[i] = &c
	}
	return g
}

// scaleUp plans the request's pods as one gang (all of them, none
// running yet) and makes the scale-up all or nothing.
func (p *Processor) scaleUp(ctx context.Context, pr *v1.ProvisioningRequest, in ProcessInput, pods []*corev1.Pod, u *update) {
	logger := klog.FromContext(ctx).WithValues("provisioningRequest", klog.KObj(pr))
	g := asGang(pr, pods)
	snap := in.Runner.Snapshot()
	before := *in.usage
	snap.Fork()
	keep := false
	defer func() {
		if u.launch != nil {
			// Left open for the launch, which keeps or drops it.
			return
		}
		end := snap.Revert
		if keep {
			end = snap.Commit
		} else {
			*in.usage = before
		}
		if err := end(); err != nil {
			logger.Error(err, "Closing the snapshot fork failed")
		}
	}()
	outs, usage, err := in.Planner.PlanGangs(ctx, in.Runner, []*gang.Gang{g}, in.Candidates, in.Groups, *in.usage, in.Now)
	*in.usage = usage
	if err != nil || len(outs) != 1 {
		logger.Error(err, "Planning failed")
		u.set(pr, in, v1.Provisioned, metav1.ConditionFalse, ReasonFailedToCheckCapacity, fmt.Sprintf("Failed to plan the request: %v", err))
		return
	}
	o := outs[0]
	switch {
	case o.FitsExisting:
		keep = true
		if u.set(pr, in, v1.Provisioned, metav1.ConditionTrue, ReasonCapacityIsFound, MessageCapacityIsFound) {
			u.event(corev1.EventTypeNormal, ReasonCapacityIsFound, fmt.Sprintf("all %d pod(s) fit existing and upcoming nodes; booked for %s", len(pods), p.opts.BookingDuration))
		}
	case len(o.ScaleUps) > 0:
		// Planned in a fork the launch keeps (made) or drops (failed,
		// with the usage it took), so the rest of the pass plans around
		// what was really made.
		u.launch = &launch{ups: o.ScaleUps, pods: len(pods), usageBefore: before}
	default:
		msg := "Capacity is not found, CA will try to find it later: " + o.Message
		if rs := reasons(o.Reasons); rs != "" {
			msg += "; " + rs
		}
		if u.set(pr, in, v1.Provisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, msg) {
			u.event(corev1.EventTypeNormal, report.ReasonNotTriggerScaleUp, msg)
		}
	}
}

// launchOne makes a request's decided scale-up, all or nothing, and sets
// its Provisioned condition from what came of it.
func (p *Processor) launchOne(ctx context.Context, pr *v1.ProvisioningRequest, in ProcessInput, u *update) {
	results := p.actuator.Execute(ctx, u.launch.ups, in.Now)
	var failed []string
	for i := range results {
		results[i].Pods = nil
		if results[i].Err != nil {
			failed = append(failed, results[i].Err.Error())
		}
	}
	u.results = results
	plan := describe(u.launch.ups)
	if len(failed) > 0 {
		msg := fmt.Sprintf("scale-up %s failed and was undone: %s; CA will try again later", plan, strings.Join(failed, "; "))
		u.set(pr, in, v1.Provisioned, metav1.ConditionFalse, ReasonCapacityIsNotFound, msg)
		u.event(corev1.EventTypeWarning, report.ReasonFailedScaleUp, msg)
		return
	}
	u.set(pr, in, v1.Provisioned, metav1.ConditionTrue, ReasonCapacityIsProvisioned, "Capacity is provisioned: "+plan)
	u.event(corev1.EventTypeNormal, report.ReasonTriggeredScaleUp, fmt.Sprintf("atomic scale-up for all %d pod(s): %s", u.launch.pods, plan))
	klog.FromContext(ctx).Info("ProvisioningRequest provisioned", "provisioningRequest", klog.KObj(pr), "scaleUp", plan, "pods", u.launch.pods)
}

// placeAll places every pod on the candidates and keeps them, or keeps
// none and says how far it got.
func placeAll(ctx context.Context, runner *framework.Runner, pods []*corev1.Pod, candidates []string) (bool, string, error) {
	snap := runner.Snapshot()
	snap.Fork()
	for i, pod := range pods {
		pl, err := runner.SchedulePod(ctx, pod, candidates)
		if err != nil {
			return false, "", errors.Join(err, snap.Revert())
		}
		if pl.Node == "" {
			return false, fmt.Sprintf("%d of %d pod(s) fit on existing and upcoming nodes; %s", i, len(pods), rejection(pl.Results)), snap.Revert()
		}
	}
	return true, "", snap.Commit()
}

// rejection sums up why a pod fit no node: the plugins, by node count.
func rejection(results []framework.NodeResult) string {
	if len(results) == 0 {
		return "there are no nodes"
	}
	counts := map[string]int{}
	var order []string
	for _, r := range results {
		key := r.Plugin
		if r.Message != "" {
			key += ": " + r.Message
		}
		if counts[key] == 0 {
			order = append(order, key)
		}
		counts[key]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d node(s) %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

func describe(ups []act.ScaleUp) string {
	parts := make([]string, 0, len(ups))
	for _, up := range ups {
		parts = append(parts, fmt.Sprintf("%s +%d", up.Group.Id, up.Delta))
	}
	return strings.Join(parts, ", ")
}

func reasons(rs []plan.GroupReason) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, "; ")
}

// trim keeps messages well inside the CRD's limit (32768).
func trim(s string) string {
	const max = 2000
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
