// Package report is the loop's last stage: metrics, and events on the pods
// telling whether they triggered a scale-up and, if not, why not. Events are
// deduplicated: a pod hears the same thing again only when it changes or
// after the repeat interval.
package report

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
)

// Event reasons, upstream's names.
const (
	ReasonTriggeredScaleUp  = "TriggeredScaleUp"
	ReasonNotTriggerScaleUp = "NotTriggerScaleUp"
	ReasonFailedScaleUp     = "FailedScaleUp"
)

// Reporter emits events and sets metrics.
type Reporter struct {
	recorder record.EventRecorder
	metrics  *metrics.Metrics
	repeat   time.Duration
	mu       sync.Mutex
	sent     map[types.UID]sentEvent
	limit    limiter
	status   *corev1.ObjectReference
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

type sentEvent struct {
	message string
	at      time.Time
}

// New returns a reporter; repeat is how often an unchanged message is
// sent again.
func New(recorder record.EventRecorder, m *metrics.Metrics, repeat time.Duration) *Reporter {
	return &Reporter{recorder: recorder, metrics: m, repeat: repeat, sent: map[types.UID]sentEvent{}}
}

// ScaleUps reports what the actuator did.
func (r *Reporter) ScaleUps(results []act.LaunchResult, now time.Time) {
	for _, res := range results {
		if res.Added > 0 {
			r.metrics.ScaledUpNodes.WithLabelValues(res.Group.Id).Add(float64(res.Added))
			r.metrics.Activity("scaleUp", now)
		}
		if res.Err != nil {
			r.metrics.FailedScaleUps.WithLabelValues("cloudProviderError").Inc()
			for _, p := range res.Pods {
				r.event(p, corev1.EventTypeWarning, ReasonFailedScaleUp, fmt.Sprintf("scale-up of %s failed: %v", res.Group.Id, res.Err), now)
			}
			continue
		}
		msg := fmt.Sprintf("pod triggered scale-up: [{%s %d->%d (max: %d)}]", res.Group.Id, res.Group.Target, res.Group.Target+res.Added, res.Group.Max)
		for _, p := range res.Pods {
			r.event(p, corev1.EventTypeNormal, ReasonTriggeredScaleUp, msg, now)
		}
	}
}

// NotHelped reports pods no scale-up could help, with each group's reason.
func (r *Reporter) NotHelped(pods []*corev1.Pod, reasons map[types.UID][]plan.GroupReason, now time.Time) {
	counts := map[string]int{}
	for _, p := range pods {
		rs := reasons[p.UID]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Group < rs[j].Group })
		parts := make([]string, len(rs))
		counted := map[string]bool{} // a pod counts once per reason
		for i, g := range rs {
			parts[i] = g.String()
			if !counted[g.Reason] {
				counted[g.Reason] = true
				counts[g.Reason]++
			}
		}
		msg := "pod didn't trigger scale-up: no node group can help"
		if len(parts) > 0 {
			msg = "pod didn't trigger scale-up: " + strings.Join(parts, "; ")
		}
		r.event(p, corev1.EventTypeNormal, ReasonNotTriggerScaleUp, msg, now)
	}
	r.metrics.UnneededPodsNotHelped.Reset()
	for reason, n := range counts {
		r.metrics.UnneededPodsNotHelped.WithLabelValues(reason).Set(float64(n))
	}
}

// Groups sets the per-group and node-count metrics.
func (r *Reporter) Groups(groups []*nodegroups.Info, nodes []*corev1.Node) {
	r.metrics.NodeGroupsCount.Set(float64(len(groups)))
	for _, g := range groups {
		r.metrics.NodeGroupMinCount.WithLabelValues(g.Id).Set(float64(g.Min))
		r.metrics.NodeGroupMaxCount.WithLabelValues(g.Id).Set(float64(g.Max))
		r.metrics.NodeGroupTargetCount.WithLabelValues(g.Id).Set(float64(g.Target))
	}
	ready, unready, upcoming := 0, 0, 0
	for _, n := range nodes {
		if nodeutil.IsNodeReady(n) {
			ready++
		} else {
			unready++
		}
	}
	for _, g := range groups {
		upcoming += g.Upcoming()
	}
	r.metrics.NodesCount.WithLabelValues("ready").Set(float64(ready))
	r.metrics.NodesCount.WithLabelValues("unready").Set(float64(unready))
	r.metrics.NodesCount.WithLabelValues("notStarted").Set(float64(upcoming))
}

// ReasonPoolStalled is the event on a node whose incomplete DRA pool
// stalled (nodegroups.StalledPool).
const ReasonPoolStalled = "DRAPoolStalled"

// StalledPools tells each node whose incomplete DRA pool stalled that it
// no longer counts as coming capacity, naming the driver and the pool.
func (r *Reporter) StalledPools(groups []*nodegroups.Info, nodes []*corev1.Node, stall time.Duration, now time.Time) {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	for _, g := range groups {
		for name, sp := range g.Stalled {
			n := byName[name]
			if n == nil {
				continue
			}
			pool := "no pool"
			if sp.Pool != "" {
				pool = "pool " + sp.Pool
			}
			r.eventOn(n, n.UID, corev1.EventTypeWarning, ReasonPoolStalled, fmt.Sprintf(
				"DRA driver %s, %s: %s, unchanged since %s (more than --dra-pool-stall-time=%s); the node no longer counts as coming capacity for pending pods of node group %s",
				sp.Driver, pool, sp.Why, sp.Since.UTC().Format(time.RFC3339), stall, g.Id), now)
		}
	}
}

// event sends unless the pod heard the same message within repeat.
func (r *Reporter) event(pod *corev1.Pod, typ, reason, msg string, now time.Time) {
	r.eventOn(pod, pod.UID, typ, reason, msg, now)
}

func (r *Reporter) eventOn(obj runtime.Object, uid types.UID, typ, reason, msg string, now time.Time) {
	r.mu.Lock()
	last, ok := r.sent[uid]
	if ok && last.message == reason+msg && now.Sub(last.at) < r.repeat {
		r.mu.Unlock()
		return
	}
	if reason == ReasonNotTriggerScaleUp && !r.limit.allow(uid, now) {
		r.mu.Unlock() // not recorded as sent: it goes out once allowed
		return
	}
	r.sent[uid] = sentEvent{message: reason + msg, at: now}
	r.mu.Unlock()
	r.recorder.Event(obj, typ, reason, msg)
}

// Forget drops the memory of pods that are gone, so it does not grow.
func (r *Reporter) Forget(alive map[types.UID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.sent {
		if !alive[uid] {
			delete(r.sent, uid)
		}
	}
	r.limit.forget(alive)
}

// GangReport is what the planner decided for one gang, as the reporter
// tells it.
type GangReport struct {
	Namespace, Name string
	// Composite: Name is a CompositePodGroup (the root of the gang's tree).
	Composite bool
	UID       types.UID
	Pods      []*corev1.Pod
	// Planned names the node groups and node counts, empty when nothing
	// was planned.
	Planned string
	// Message says why nothing was planned (or why the gang waits).
	Message string
}

// Gangs tells each gang's PodGroup and members what was planned for the
// gang as a whole, or why nothing was.
func (r *Reporter) Gangs(gangs []GangReport, now time.Time) {
	for _, g := range gangs {
		meta := metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name, UID: g.UID}
		var ref runtime.Object = &schedulingv1beta1.PodGroup{ObjectMeta: meta}
		if g.Composite {
			ref = &schedulingv1alpha3.CompositePodGroup{ObjectMeta: meta}
		}
		reason, typ, msg := ReasonTriggeredScaleUp, corev1.EventTypeNormal, "gang triggered scale-up: "+g.Planned
		if g.Planned == "" {
			reason, msg = ReasonNotTriggerScaleUp, "gang didn't trigger scale-up: "+g.Message
		}
		if g.UID != "" { // a PodGroup that does not exist hears nothing
			r.eventOn(ref, g.UID, typ, reason, msg, now)
		}
		for _, p := range g.Pods {
			r.event(p, typ, reason, msg, now)
		}
	}
}
