// Package disagree detects when the autoscaler and the scheduler disagree
// on what a usable node is: a pending pod that the simulation keeps
// placing on an existing node (one that was there, or one the autoscaler
// added) while the real scheduler leaves it unschedulable. The node may be
// ready, or registered but not usable yet (not Ready, a start-up taint
// left, DRA pools incomplete): then the simulation counts on a node that
// does not come, and the event says what it lacks. Past
// a threshold this is no longer the scheduler catching up but a real
// difference (a scheduler configuration, a feature gate, a plugin the
// simulation does not run, stale state), and the user is told: a Warning
// event on the pod quoting the scheduler and naming the node, and metrics.
package disagree

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

// ReasonSchedulerDisagreement is the reason of the Warning event.
const ReasonSchedulerDisagreement = "SchedulerDisagreement"

// Disagreement is one pod the simulation and the scheduler disagree on.
type Disagreement struct {
	Namespace, Name string
	UID             types.UID
	// Node is where the simulation places the pod.
	Node string
	// Since is when the simulation first placed it on an existing node.
	Since time.Time
	// SchedulerMessage is the scheduler's word (the PodScheduled
	// condition's message).
	SchedulerMessage string
	// NodeNotUsable says why Node, registered, cannot take pods yet; ""
	// when it is ready and usable.
	NodeNotUsable string
}

// Detector remembers, across loops, since when each pending pod has been
// placed on an existing node by the simulation. Not safe for concurrent
// use; the loop calls it once per pass.
type Detector struct {
	threshold time.Duration
	recorder  record.EventRecorder
	metrics   *metrics.Metrics
	seen      map[types.UID]*entry
}

type entry struct {
	since    time.Time
	node     string
	reported bool
}

// New returns a detector; pods are in disagreement once the simulation has
// placed them for threshold while they stay unschedulable.
func New(threshold time.Duration, recorder record.EventRecorder, m *metrics.Metrics) *Detector {
	return &Detector{threshold: threshold, recorder: recorder, metrics: m, seen: map[types.UID]*entry{}}
}

// Update takes the pending pods the simulation placed and where, and the
// registered nodes: each maps to "" when it is ready and usable, else to
// why it is not. It returns the pods in disagreement now, sorted, and
// tells each new one with a Warning event. Pods not placed on a
// registered node this pass are forgotten: a pod that waits for an
// upcoming node, or that the simulation no longer places, starts over.
func (d *Detector) Update(placed map[*corev1.Pod]string, registered map[string]string, now time.Time) []Disagreement {
	keep := make(map[types.UID]bool, len(placed))
	var out []Disagreement
	for pod, node := range placed {
		notUsable, ok := registered[node]
		if !ok {
			continue
		}
		keep[pod.UID] = true
		e := d.seen[pod.UID]
		if e == nil || e.node != node {
			// A pod moving between nodes in the simulation still
			// disagrees; the clock runs from its first placement.
			if e == nil {
				e = &entry{since: now}
				d.seen[pod.UID] = e
			}
			e.node = node
		}
		if now.Sub(e.since) < d.threshold {
			continue
		}
		dis := Disagreement{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Node: node, Since: e.since,
			SchedulerMessage: schedulerMessage(pod), NodeNotUsable: notUsable}
		out = append(out, dis)
		if !e.reported {
			e.reported = true
			d.metrics.SchedulerDisagreements.Inc()
			if d.recorder != nil {
				d.recorder.Event(pod, corev1.EventTypeWarning, ReasonSchedulerDisagreement, dis.Message(now))
			}
		}
	}
	for uid := range d.seen {
		if !keep[uid] {
			delete(d.seen, uid)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	d.metrics.SchedulerDisagreementPods.Set(float64(len(out)))
	return out
}

// Message is the event text.
func (d Disagreement) Message(now time.Time) string {
	msg := d.SchedulerMessage
	if msg == "" {
		msg = "no message"
	}
	if d.NodeNotUsable != "" {
		return fmt.Sprintf("the autoscaler's simulation counts on node %s for the pod, but the node is registered and not usable (%s); "+
			"the pod has waited %s and the scheduler leaves it unschedulable: %q; "+
			"check why the node does not become usable (its kubelet, start-up taints, its DRA drivers' ResourceSlices)",
			d.Node, d.NodeNotUsable, now.Sub(d.Since).Round(time.Second), msg)
	}
	return fmt.Sprintf("the autoscaler's simulation places the pod on node %s, but the scheduler has left it unschedulable for %s: %q; "+
		"the autoscaler and the scheduler disagree (compare --scheduler-config-file and --feature-gates with the scheduler's)",
		d.Node, now.Sub(d.Since).Round(time.Second), msg)
}

func schedulerMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}
