package buffers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// PodPlanner plans scale-ups for pods (plan.Planner).
type PodPlanner interface {
	Plan(ctx context.Context, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage, now time.Time) (*plan.Plan, error)
}

// Manager serves the buffers, one pass at a time.
type Manager struct {
	src      Source
	dyn      dynamic.Interface    // nil: no status written (explain)
	recorder record.EventRecorder // nil: no events
	admit    *admissions          // nil: no admission check
	shots    latches              // what one-shot buffers reached
}

// New returns a processor reading from src; dyn writes the buffers'
// status and recorder their events (either may be nil).
func New(src Source, dyn dynamic.Interface, recorder record.EventRecorder) *Manager {
	return &Manager{src: src, dyn: dyn, recorder: recorder}
}

// WithAdmission has every buffer's pod judged by the API server's
// admission (through api, a server-side dry run) before it holds any
// capacity; verdicts are kept per buffer, generation and template version
// for AdmissionRecheck.
func (p *Manager) WithAdmission(api Admission) *Manager {
	p.admit = newAdmissions(api)
	return p
}

// RunInput is the pass's state the buffers are served in. The runner's
// snapshot holds the cluster with the real pending pods already placed
// (on existing, upcoming and newly planned nodes): buffer pods only get
// what is left.
type RunInput struct {
	Runner *framework.Runner
	// Candidates are the nodes the pass's pending pods may go to; the
	// nodes the pass planned are added from the snapshot.
	Candidates []string
	// NotYet are the candidates that are not ready yet (upcoming and
	// booting nodes): pods placed there fit, but do not count as ready
	// replicas.
	NotYet  map[string]bool
	Planner PodPlanner
	Groups  []*nodegroups.Info
	// Usage counts the cluster, the nodes coming and the pass's
	// scale-ups so far, for the limits.
	Usage limits.Usage
	// ClassOf groups equivalent pods (estimator.ClassKey); nil: none.
	ClassOf        func(*corev1.Pod) string
	ClaimTemplates []*resourceapi.ResourceClaimTemplate
	// Pods are the cluster's pods: the bound ones matching a one-shot
	// buffer fill it.
	Pods []*corev1.Pod
	Now  time.Time
}

// PassOutcome is what a pass did for the buffers.
type PassOutcome struct {
	Buffers  []*Buffer
	ScaleUps []act.ScaleUp
	// Pods are the buffer pods of the pass, for those who must tell them
	// from real ones.
	Pods []*corev1.Pod
}

// Run resolves every buffer of the active-capacity strategy into pods,
// fits them on what the real pods left, and plans nodes for the rest.
// A buffer that cannot be served says why in its status; it never stops
// the others. Only a failing simulation is an error.
func (p *Manager) Run(ctx context.Context, in RunInput) (*PassOutcome, error) {
	logger := klog.FromContext(ctx)
	out := &PassOutcome{}
	objs := p.src.Buffers()
	if len(objs) == 0 {
		return out, nil
	}
	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	for _, t := range in.ClaimTemplates {
		templates[t.Namespace+"/"+t.Name] = t
	}
	ev := newEvaluators(deviceClasses(in.Runner))
	pq := &passQuotas{src: p.src, ev: ev, byNS: map[string]*quotas{}, errs: map[string]error{}}
	seen := map[types.UID]bool{}
	var podsOf map[string][]*corev1.Pod // by namespace, made when a one-shot buffer needs it
	for _, obj := range sorted(objs) {
		b := p.one(ctx, obj, in.Now)
		if b == nil {
			continue
		}
		seen[b.Obj.UID] = true
		out.Buffers = append(out.Buffers, b)
		ns := b.Obj.Namespace
		claimTemplate := func(name string) *resourceapi.ResourceClaimTemplate { return templates[ns+"/"+name] }
		if b.NotReady == "" && b.OneShot == nil && b.Obj.OneShot() {
			if podsOf == nil {
				podsOf = byNamespace(in.Pods)
			}
			latched, _ := p.shots.get(b.Obj.UID)
			if err := b.measure(podsOf[ns], latched, ev, claimTemplate, in.Now); err != nil {
				b.NotReady, b.Message = ReasonInvalid, err.Error()
			}
		}
		if b.OneShot != nil {
			p.shots.put(b.Obj.UID, *b.OneShot)
		}
		p.size(ctx, b, pq, claimTemplate, in.Now)
		out.Pods = append(out.Pods, b.Pods...)
	}
	if p.admit != nil {
		p.admit.forget(seen)
	}
	p.shots.forget(seen)
	if len(out.Pods) == 0 {
		return out, nil
	}
	if err := p.simulate(ctx, in, out); err != nil {
		return nil, err
	}
	for _, b := range out.Buffers {
		if len(b.Pods) > 0 {
			logger.V(2).Info("Capacity buffer", "capacityBuffer", b.Key(), "pods", len(b.Pods), "fit", b.Fit, "ready", b.ReadyFit,
				"planned", b.Planned, "unplaced", b.Unplaced, "infeasible", b.Infeasible)
		}
	}
	return out, nil
}

// size decides what the buffer holds in this pass and makes its pods:
// nothing unless it is ready, inside its windows, admitted, and its
// namespace's quotas are known; then what the quotas leave.
func (p *Manager) size(ctx context.Context, b *Buffer, pq *passQuotas, claimTemplate func(name string) *resourceapi.ResourceClaimTemplate, now time.Time) {
	if b.NotReady != "" || !b.Active || (b.OneShot != nil && b.OneShot.Terminal != "") {
		return
	}
	if p.admit != nil {
		if p.admit.check(ctx, b, now); b.NotReady != "" {
			return
		}
	}
	q, err := pq.of(ctx, b.Obj.Namespace)
	if err != nil {
		b.Replicas, b.QuotaErr = 0, err.Error()
		return
	}
	c, err := pq.ev.charge(b.Template, b.Obj.Namespace, claimTemplate)
	if err != nil {
		b.NotReady, b.Message = ReasonInvalid, err.Error()
		return
	}
	if b.AdmissionQuota != "" {
		// The API server's quota admission refused one pod: none fit.
		b.Replicas, b.Quota = 0, b.AdmissionQuota
	} else {
		b.Replicas, b.Quota = q.take(b.remaining(), c)
	}
	b.Pods = podsFor(b.Obj, b.Template, b.Replicas)
}

// passQuotas reads each namespace's quotas once in a pass; its buffers
// then take from them in turn.
type passQuotas struct {
	src  Source
	ev   evaluators
	byNS map[string]*quotas
	errs map[string]error
}

// of is the namespace's quotas, or why they cannot be known: unknown
// quotas are no room, never unlimited.
func (pq *passQuotas) of(ctx context.Context, ns string) (*quotas, error) {
	if q, ok := pq.byNS[ns]; ok {
		return q, nil
	}
	if err, ok := pq.errs[ns]; ok {
		return nil, err
	}
	list, err := pq.src.Quotas(ns)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing ResourceQuotas failed; the namespace's buffers hold nothing this pass", "namespace", ns)
		pq.errs[ns] = fmt.Errorf("listing the ResourceQuotas of namespace %s: %w", ns, err)
		return nil, pq.errs[ns]
	}
	pq.byNS[ns] = newQuotas(list, pq.ev)
	return pq.byNS[ns], nil
}

// one converts a buffer object; nil for one this autoscaler leaves alone
// (being deleted, or of another strategy).
func (p *Manager) one(ctx context.Context, u *unstructured.Unstructured, now time.Time) *Buffer {
	if u.GetDeletionTimestamp() != nil {
		return nil
	}
	obj, err := v1beta1.FromUnstructured(u)
	if err != nil {
		// Enough of it to report on: its name, namespace and UID.
		meta := metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), Generation: u.GetGeneration()}
		return &Buffer{Obj: &v1beta1.CapacityBuffer{ObjectMeta: meta}, NotReady: ReasonInvalid, Message: err.Error(), Active: true}
	}
	if s := obj.Strategy(); s != v1beta1.ActiveCapacity {
		klog.FromContext(ctx).V(4).Info("CapacityBuffer of another strategy; left alone", "capacityBuffer", klog.KObj(obj), "strategy", s)
		return nil
	}
	if obj.OneShot() {
		// Terminal for the object's lifetime: not resolved again.
		if latched, _ := p.shots.get(obj.UID); terminalOf(obj, latched) != "" {
			return ended(obj, latched)
		}
	}
	return resolve(obj, p.src, now)
}

// byNamespace groups pods by namespace.
func byNamespace(pods []*corev1.Pod) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		out[p.Namespace] = append(out[p.Namespace], p)
	}
	return out
}

// sorted orders the buffers oldest first (they take quota room in turn),
// then by namespace and name.
func sorted(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := append([]*unstructured.Unstructured(nil), objs...)
	sort.SliceStable(out, func(i, j int) bool {
		ti, tj := out[i].GetCreationTimestamp(), out[j].GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return out[i].GetNamespace()+"/"+out[i].GetName() < out[j].GetNamespace()+"/"+out[j].GetName()
	})
	return out
}

// simulate places the buffer pods on the nodes there are and will be,
// and plans new nodes for those left.
func (p *Manager) simulate(ctx context.Context, in RunInput, out *PassOutcome) error {
	byUID := map[types.UID]*Buffer{}
	for _, b := range out.Buffers {
		for _, pod := range b.Pods {
			byUID[pod.UID] = b
		}
	}
	rest, fits, err := fitexisting.FitWith(ctx, in.Runner, out.Pods, candidates(in), fitexisting.Options{ClassOf: in.ClassOf})
	if err != nil {
		return fmt.Errorf("capacity buffers: %w", err)
	}
	ready := readyNodes(in)
	for pod, node := range fits {
		b := byUID[pod.UID]
		b.Fit++
		if ready[node] {
			b.ReadyFit++
		}
	}
	if len(rest) == 0 {
		return nil
	}
	pl, err := in.Planner.Plan(ctx, rest, in.Groups, in.Usage, in.Now)
	if err != nil {
		return fmt.Errorf("capacity buffers: %w", err)
	}
	for _, up := range pl.ScaleUps {
		seen := map[*Buffer]int{}
		for _, pod := range up.Pods {
			seen[byUID[pod.UID]]++
		}
		for b, n := range seen {
			b.Planned += n
			b.ScaleUps = append(b.ScaleUps, fmt.Sprintf("%s +%d", up.Group.Id, up.Delta))
		}
		// The pods are not API objects: nothing to tell them, nothing
		// to nominate.
		up.Pods, up.Nodes = nil, nil
		out.ScaleUps = append(out.ScaleUps, up)
	}
	for _, pod := range pl.NotHelped {
		b := byUID[pod.UID]
		b.Unplaced++
		rs := pl.Reasons[pod.UID]
		if infeasible(rs, len(in.Groups) == 0) {
			b.Infeasible++
		}
		if b.Why == "" {
			b.Why = why(rs)
		}
	}
	return nil
}

// readyNodes are the candidates that exist and are Ready now: registered,
// not booting or upcoming, with a Ready condition that is True.
func readyNodes(in RunInput) map[string]bool {
	out := make(map[string]bool, len(in.Candidates))
	infos := in.Runner.Snapshot().NodeInfos()
	for _, name := range in.Candidates {
		if in.NotYet[name] {
			continue
		}
		ni, err := infos.Get(name)
		if err != nil || ni.Node() == nil {
			continue
		}
		for _, c := range ni.Node().Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out[name] = true
			}
		}
	}
	return out
}

// schedulerPlugins are the names of the framework's in-tree plugins (the
// only ones the simulation runs): a group reason naming one is the
// template node rejecting the pod, not a limit of the moment.
var schedulerPlugins = func() map[string]bool {
	out := map[string]bool{}
	for name := range plugins.NewInTreeRegistry() {
		out[name] = true
	}
	return out
}()

// infeasible says no group can ever hold the pod: every group's template
// rejects it, or there is no group. A group held back by a limit, a
// backoff or a reservation might later, so its pod is not infeasible; nor
// is one without reasons while groups exist (nothing says it cannot).
func infeasible(rs []plan.GroupReason, noGroups bool) bool {
	if len(rs) == 0 {
		return noGroups
	}
	for _, r := range rs {
		if !schedulerPlugins[r.Reason] {
			return false
		}
	}
	return true
}

// candidates are the pass's candidates and the nodes it planned (in the
// snapshot, not among them): a buffer pod may take what a planned node
// has left over rather than ask for another node.
func candidates(in RunInput) []string {
	out := append([]string(nil), in.Candidates...)
	known := make(map[string]bool, len(out))
	for _, n := range out {
		known[n] = true
	}
	infos, _ := in.Runner.Snapshot().NodeInfos().List()
	for _, ni := range infos {
		if n := ni.Node().Name; !known[n] {
			out = append(out, n)
		}
	}
	return out
}

// deviceClasses are the snapshot's DeviceClasses (none without a runner).
func deviceClasses(runner *framework.Runner) []*resourceapi.DeviceClass {
	if runner == nil {
		return nil
	}
	classes, err := runner.Snapshot().DeviceClasses().List()
	if err != nil {
		return nil
	}
	return classes
}

func why(rs []plan.GroupReason) string {
	if len(rs) == 0 {
		return "no node group can help"
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}
