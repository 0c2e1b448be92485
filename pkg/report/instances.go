package report

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
)

// Event reasons for instances the tracker gave up or could not handle.
const (
	ReasonScaleUpTimedOut      = "ScaleUpTimedOut"
	ReasonInstanceRemovalError = "FailedToRemoveInstances"
)

// WithStatusObject names the object that events about instances without a
// Node go to (the status ConfigMap, as upstream does).
func (r *Reporter) WithStatusObject(namespace, name string) *Reporter {
	r.status = &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: namespace, Name: name}
	return r
}

// Instances tells what the tracker gave up and which provider calls
// failed: an event on every registered node concerned, and one on the
// status object naming all of them; the failed calls are counted.
func (r *Reporter) Instances(failures []track.Failure, errs []track.RemovalError) {
	for _, f := range failures {
		msg := fmt.Sprintf("node group %s: %s (%s)", f.Group, f.Message, f.Reason)
		if len(f.Nodes) > 0 {
			msg += "; instances: " + strings.Join(f.Nodes, ", ")
		}
		r.emit(f.Nodes, corev1.EventTypeWarning, ReasonScaleUpTimedOut, msg)
	}
	for _, e := range errs {
		r.metrics.InstanceErrors.WithLabelValues(e.Group, e.Op).Inc()
		msg := fmt.Sprintf("node group %s: %s failed, retried with backoff: %v", e.Group, e.Op, e.Err)
		if len(e.Nodes) > 0 {
			msg += "; instances: " + strings.Join(e.Nodes, ", ")
		}
		r.emit(e.Nodes, corev1.EventTypeWarning, ReasonInstanceRemovalError, msg)
	}
}

// emit sends msg to the status object and to each named Node (an
// instance that never registered has no Node: the event finds none).
func (r *Reporter) emit(nodes []string, typ, reason, msg string) {
	if r.recorder == nil {
		return
	}
	if r.status != nil {
		r.recorder.Event(r.status, typ, reason, msg)
	}
	for _, n := range nodes {
		if strings.Contains(n, "://") {
			continue // a providerID: no Node to tell
		}
		r.recorder.Event(&corev1.Node{ObjectMeta: metaName(n)}, typ, reason, msg)
	}
}
