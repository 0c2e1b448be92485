package externalgrpc

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Reasons of the Warning events about bad answers of the server: the
// names the clusterapi provider gives the same problems, plus the one only
// a remote server can make.
const (
	// ReasonInvalidNodeGroup: NodeGroups listed a group with an empty or
	// duplicate id or impossible sizes, or NodeGroupTargetSize answered a
	// negative size.
	ReasonInvalidNodeGroup = "InvalidNodeGroup"
	// ReasonInvalidTemplate: a template that cannot be used (slices not of
	// the template's node, an incomplete pool, undecodable bytes).
	ReasonInvalidTemplate = "InvalidNodeTemplate"
	// ReasonInvalidReservation: a reservation without id or kind, with a
	// negative count or ending before it starts, or listed twice.
	ReasonInvalidReservation = "InvalidReservation"
	// ReasonUnknownNodeGroup: NodeGroupForNode or a reservation named a
	// group NodeGroups did not list (validly).
	ReasonUnknownNodeGroup = "UnknownNodeGroup"
)

// WithEvents records a Warning event on obj for every bad answer of the
// server, naming the RPC, the group and what was wrong. obj is meant to be
// the autoscaler's status ConfigMap: a node group is no Kubernetes object.
func WithEvents(rec record.EventRecorder, obj *corev1.ObjectReference) ProviderOption {
	return func(p *Provider, _ *[]grpc.DialOption) { p.events.rec, p.events.obj = rec, obj }
}

// The limits of warner: no more than eventBurst new events per
// eventWindow. client-go's correlator combines an object's events of one
// reason beyond 10 in 10 minutes (hiding the groups they name) and drops
// an object's Warnings beyond a burst of 25, refilled one per 5 minutes;
// the status ConfigMap carries the autoscaler's other warnings too.
const (
	eventBurst  = 10
	eventWindow = 10 * time.Minute
)

// warner tells each distinct bad answer once, as a Warning event: when it
// is first seen and when its message changes. A problem that is gone is
// forgotten, so that its return is told at once. The log names every bad
// answer on every pass; the event is for `kubectl get events`. A problem
// held back by the limits is told in a later window (it is not marked
// told).
type warner struct {
	rec   record.EventRecorder
	obj   *corev1.ObjectReference
	clock clock.PassiveClock

	mu sync.Mutex
	// told is the message last told, by rpc and subject (a group id, a
	// reservation id, or a position for an entry without id).
	told         map[warnKey]string
	windowStart  time.Time
	sentInWindow int
}

type warnKey struct{ rpc, subject string }

func newWarner() *warner {
	return &warner{clock: clock.RealClock{}, told: map[warnKey]string{}}
}

// warn records msg about subject of rpc unless it was the last told.
func (w *warner) warn(address, rpc, subject, reason, msg string) {
	if w.rec == nil || w.obj == nil {
		return
	}
	k := warnKey{rpc, subject}
	w.mu.Lock()
	if last, ok := w.told[k]; ok && last == msg {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	if now.Sub(w.windowStart) >= eventWindow {
		w.windowStart, w.sentInWindow = now, 0
	}
	if w.sentInWindow >= eventBurst {
		w.mu.Unlock()
		return
	}
	w.sentInWindow++
	w.told[k] = msg
	w.mu.Unlock()
	w.rec.Event(w.obj, corev1.EventTypeWarning, reason, fmt.Sprintf("externalgrpc %s %s: %s", address, rpc, msg))
}

// forget drops what was told about subject of rpc (its answer is good).
func (w *warner) forget(rpc, subject string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.told, warnKey{rpc, subject})
}

// sweep forgets the problems of rpc whose subject is no longer bad.
func (w *warner) sweep(rpc string, stillBad func(subject string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.told {
		if k.rpc == rpc && !stillBad(k.subject) {
			delete(w.told, k)
		}
	}
}

// badAnswer logs a bad answer and tells it (see warner).
func (p *Provider) badAnswer(rpc, subject, reason, msg string) {
	p.logger.Error(nil, "Bad answer from the externalgrpc server; ignored", "rpc", rpc, "address", p.cfg.Address, "reason", reason, "problem", msg)
	p.events.warn(p.cfg.Address, rpc, subject, reason, msg)
}

// groupList is "node group a" or "node groups a, b" for messages.
func groupList(ids []string) string {
	if len(ids) == 1 {
		return fmt.Sprintf("node group %q", ids[0])
	}
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	return "node groups " + strings.Join(quoted, ", ")
}
