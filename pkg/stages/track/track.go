// Package track follows every scale-up until its nodes register. A request
// that is not fulfilled within --max-node-provision-time, or whose
// instances the provider reports as failed, is given up: the instances
// that never registered are deleted, the target size goes back down, and
// the group is backed off so the next-best group serves the pods.
package track

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// Failure reasons, as failed_scale_ups_total labels them.
const (
	ReasonTimeout        = "timeout"
	ReasonOutOfResources = "outOfResources"
	ReasonCloudProvider  = "cloudProviderError"
)

// Request is one scale-up in flight.
type Request struct {
	Group      string
	Delta      int
	Time       time.Time
	ExpectedBy time.Time
}

// Failure is a scale-up given up in this loop.
type Failure struct {
	Group   string
	Reason  string
	Message string
	// Deleted are the instances removed because they never registered.
	Deleted int
}

// Tracker holds the requests in flight. Safe for concurrent reads (the
// status writer) with the loop's writes.
type Tracker struct {
	maxProvision time.Duration
	backoff      *backoff.Backoff
	mu           sync.Mutex
	requests     map[string][]*Request
	gangs        map[string]*gangRequest
}

// New returns a tracker that gives requests maxProvision to register.
func New(maxProvision time.Duration, b *backoff.Backoff) *Tracker {
	return &Tracker{maxProvision: maxProvision, backoff: b, requests: map[string][]*Request{}, gangs: map[string]*gangRequest{}}
}

// Requested records that group was asked for delta more nodes at now; a
// negative delta withdraws nodes of the newest requests (an undone part of
// a gang scale-up).
func (t *Tracker) Requested(group string, delta int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if delta > 0 {
		t.requests[group] = append(t.requests[group], &Request{Group: group, Delta: delta, Time: now, ExpectedBy: now.Add(t.maxProvision)})
		return
	}
	reqs := t.requests[group]
	for drop := -delta; drop > 0 && len(reqs) > 0; {
		last := reqs[len(reqs)-1]
		if last.Delta <= drop {
			drop -= last.Delta
			reqs = reqs[:len(reqs)-1]
			continue
		}
		last.Delta -= drop
		drop = 0
	}
	t.requests[group] = reqs
}

// InFlight returns the requests of every group, oldest first.
func (t *Tracker) InFlight() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Request
	for _, rs := range t.requests {
		for _, r := range rs {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Time.Before(out[j].Time) || out[i].Time.Equal(out[j].Time) && out[i].Group < out[j].Group
	})
	return out
}

// Update matches requests with what registered, and gives up on requests
// past their deadline or with failed instances.
func (t *Tracker) Update(ctx context.Context, groups []*nodegroups.Info, now time.Time) []Failure {
	// Gangs first: their instances go as a whole, before the per-group
	// bookkeeping below sees them.
	failures := t.updateGangs(ctx, groups, now)
	for _, g := range groups {
		if f := t.updateGroup(ctx, g, now); f != nil {
			failures = append(failures, *f)
		}
	}
	return failures
}

func (t *Tracker) updateGroup(ctx context.Context, g *nodegroups.Info, now time.Time) *Failure {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", g.Id)
	if f := t.failedInstances(ctx, g, now); f != nil {
		return f
	}
	t.mu.Lock()
	reqs := t.requests[g.Id]
	// Nodes that registered fulfil the oldest requests first.
	outstanding := 0
	for _, r := range reqs {
		outstanding += r.Delta
	}
	for done := outstanding - g.Upcoming(); done > 0 && len(reqs) > 0; {
		if reqs[0].Delta <= done {
			done -= reqs[0].Delta
			reqs = reqs[1:]
			continue
		}
		reqs[0].Delta -= done
		done = 0
	}
	t.requests[g.Id] = reqs
	expired := len(reqs) > 0 && now.After(reqs[0].ExpectedBy)
	hadRequests := outstanding > 0
	t.mu.Unlock()
	if hadRequests && len(reqs) == 0 {
		t.backoff.Succeeded(g.Id)
		logger.V(2).Info("Scale-up complete: every requested node registered")
		return nil
	}
	if !expired {
		return nil
	}
	deleted, err := removeUnregistered(ctx, g)
	f := &Failure{Group: g.Id, Reason: ReasonTimeout, Deleted: deleted,
		Message: fmt.Sprintf("%d node(s) did not register within %s", g.Upcoming(), t.maxProvision)}
	if err != nil {
		f.Message += fmt.Sprintf("; removing them failed: %v", err)
	}
	t.fail(g.Id, f, now)
	logger.Info("Scale-up timed out; nodes that never registered are removed and the group is backed off",
		"upcoming", g.Upcoming(), "deleted", deleted, "err", err)
	return f
}

// failedInstances handles instances the provider reports as failed to
// create (quota, capacity): they are removed and the group backed off at
// once, without waiting for the provision timeout.
func (t *Tracker) failedInstances(ctx context.Context, g *nodegroups.Info, now time.Time) *Failure {
	instances, err := g.Group.Nodes()
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing instances failed", "nodeGroup", g.Id)
		return nil
	}
	var failed []*corev1.Node
	reason, msg := "", ""
	for _, in := range instances {
		if in.Status == nil || in.Status.ErrorInfo == nil {
			continue
		}
		failed = append(failed, nodeFor(in.Id))
		if reason == "" {
			reason, msg = ReasonCloudProvider, in.Status.ErrorInfo.ErrorMessage
			if in.Status.ErrorInfo.ErrorClass == cloudprovider.OutOfResourcesErrorClass {
				reason = ReasonOutOfResources
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	f := &Failure{Group: g.Id, Reason: reason, Deleted: len(failed),
		Message: fmt.Sprintf("%d instance(s) failed to start: %s", len(failed), msg)}
	if err := g.Group.ForceDeleteNodes(ctx, failed); err != nil {
		f.Message += fmt.Sprintf("; removing them failed: %v", err)
	}
	// The requests stay: their healthy instances may still register, and
	// the provision timeout still guards them. Only the failed ones go.
	if _, off := t.backoff.Get(g.Id, now); off {
		// The actuator already backed the group off and counted the
		// failure when the request itself failed: only clean up.
		return nil
	}
	t.backoff.Fail(g.Id, f.Reason, now)
	klog.FromContext(ctx).Info("Instances failed to start; removed and group backed off", "nodeGroup", g.Id, "failed", len(failed), "reason", reason, "message", msg)
	return f
}

func (t *Tracker) fail(group string, f *Failure, now time.Time) {
	t.mu.Lock()
	delete(t.requests, group)
	t.mu.Unlock()
	t.backoff.Fail(group, f.Reason, now)
}

// removeUnregistered deletes the group's instances that have no Node yet,
// then lowers the target by whatever is still unaccounted for.
func removeUnregistered(ctx context.Context, g *nodegroups.Info) (int, error) {
	registered := map[string]bool{}
	for _, n := range append(append([]*corev1.Node(nil), g.Ready...), g.Booting...) {
		registered[n.Spec.ProviderID] = true
	}
	instances, err := g.Group.Nodes()
	if err != nil {
		return 0, err
	}
	var gone []*corev1.Node
	for _, in := range instances {
		if !registered[in.Id] {
			gone = append(gone, nodeFor(in.Id))
		}
	}
	if len(gone) > 0 {
		if err := g.Group.ForceDeleteNodes(ctx, gone); err != nil {
			return 0, err
		}
	}
	if rest := g.Upcoming() - len(gone); rest > 0 {
		if err := g.Group.DecreaseTargetSize(ctx, -rest); err != nil {
			return len(gone), err
		}
	}
	return len(gone), nil
}

// nodeFor stands for an instance that has no Node object: providers find
// their instances by providerID.
func nodeFor(providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: providerID}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}
