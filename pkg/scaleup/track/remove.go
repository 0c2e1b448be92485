package track

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// Retries of a failed removal wait from removalRetryBase, doubling, up to
// removalRetryMax.
const (
	removalRetryBase = 10 * time.Second
	removalRetryMax  = 5 * time.Minute
)

// RemovalError is a provider call of the tracker that failed: listing a
// group's instances, or removing instances it gave up. The loop counts
// them and tells the nodes; the removal is retried with backoff.
type RemovalError struct {
	Group string
	// Op is "list" or "delete".
	Op string
	// Nodes names the instances (node names where registered).
	Nodes []string
	Err   error
}

// removal is a give-up whose ForceDeleteNodes failed, to try again.
type removal struct {
	group    string
	ids      []string
	reason   string
	attempts int
	next     time.Time
}

// TakeErrors returns the provider errors since the last call.
func (t *Tracker) TakeErrors() []RemovalError {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.errors
	t.errors = nil
	return out
}

func (t *Tracker) recordError(e RemovalError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errors = append(t.errors, e)
}

// giveUp removes the instances ids of v's group that can go: those that
// never registered, and registered nodes that hold no pod but DaemonSet
// and mirror pods (checked on a fresh list after tainting them, so no pod
// lands meanwhile). Others are released: kept, and no longer expected.
// anonymous more nodes that the provider never named are given up by
// lowering the target. A failed removal is queued for a retry.
func (t *Tracker) giveUp(ctx context.Context, v *view, ids []string, anonymous int, reason string, now time.Time) (int, error) {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", v.info.Id)
	var batch []*corev1.Node
	var tainted []string
	action := safety.ActionGiveUp
	if reason == ReasonGangTimeout {
		action = safety.ActionGangUndo
	}
	var booked []safety.Target
	for _, id := range ids {
		x := v.byID[id]
		if x == nil || x.gone {
			continue
		}
		x.gone = true
		if x.node == nil {
			batch = append(batch, nodeFor(id))
			continue
		}
		target := safety.Target{Group: v.info.Id, Node: x.node, Empty: true}
		if r := t.gate.Allow(action, target); r != nil {
			// Kept, and no longer judged: the gate told why.
			t.release(v.info.Id, id)
			logger.Info("Released a node of a given-up scale-up instead of removing it: the safety gate refused", "node", x.node.Name, "rule", r.Rule, "detail", r.Detail)
			continue
		}
		if held, err := t.holdsWork(ctx, x.node.Name, now); err != nil || len(held) > 0 {
			// Kept: what cannot be proven idle is never removed.
			t.gate.Unbook(target)
			t.release(v.info.Id, id)
			logger.Info("Released a node of a given-up scale-up instead of removing it: it runs pods, or that could not be checked",
				"node", x.node.Name, "pods", held, "err", err)
			continue
		}
		batch = append(batch, x.node)
		tainted = append(tainted, x.node.Name)
		booked = append(booked, target)
	}
	var errs []error
	if len(batch) > 0 {
		if err := v.info.Group.ForceDeleteNodes(ctx, batch); err != nil {
			for _, b := range booked {
				t.gate.Unbook(b)
			}
			t.untaint(ctx, tainted)
			errs = append(errs, err)
			t.queueRemoval(v.info.Id, batch, reason, now, err)
		}
	}
	if rest := min(anonymous, v.unbacked); rest > 0 && len(errs) == 0 {
		if err := v.info.Group.DecreaseTargetSize(ctx, -rest); err != nil {
			errs = append(errs, err)
		} else {
			v.unbacked -= rest
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return len(batch), nil
}

// holdsWork taints the node so the scheduler stops using it, then lists
// its pods afresh: any pod that does not go with the node means work to
// keep, and the taint is lifted again. Without a client nothing is
// known, so the node holds work.
func (t *Tracker) holdsWork(ctx context.Context, node string, now time.Time) ([]string, error) {
	if t.client == nil {
		return []string{"(no API client to check)"}, nil
	}
	if _, err := drain.Taint(ctx, t.client, node, now); err != nil {
		return nil, fmt.Errorf("tainting node %s: %w", node, err)
	}
	held, err := drainability.Remaining(ctx, t.client, node)
	if err != nil || len(held) > 0 {
		t.untaint(ctx, []string{node})
	}
	return held, err
}

func (t *Tracker) untaint(ctx context.Context, nodes []string) {
	if t.client == nil {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := drain.Untaint(uctx, t.client, n); err != nil {
			klog.FromContext(ctx).Error(err, "Could not untaint a node whose removal failed", "node", n)
		}
	}
}

func (t *Tracker) queueRemoval(group string, batch []*corev1.Node, reason string, now time.Time, err error) {
	r := &removal{group: group, reason: reason, next: now.Add(removalRetryBase), attempts: 1}
	var names []string
	for _, n := range batch {
		r.ids = append(r.ids, n.Spec.ProviderID)
		names = append(names, n.Name)
	}
	t.mu.Lock()
	t.removals = append(t.removals, r)
	t.mu.Unlock()
	t.recordError(RemovalError{Group: group, Op: "delete", Nodes: names, Err: err})
}

// retryRemovals tries the failed removals that are due again, against
// what the group holds now: instances already gone are done, nodes that
// got pods meanwhile are released.
func (t *Tracker) retryRemovals(ctx context.Context, views map[string]*view, now time.Time) {
	t.mu.Lock()
	due := t.removals[:0:0]
	var later []*removal
	for _, r := range t.removals {
		if now.Before(r.next) {
			later = append(later, r)
		} else {
			due = append(due, r)
		}
	}
	t.removals = later
	t.mu.Unlock()
	for _, r := range due {
		v := views[r.group]
		if v == nil {
			continue // the group is gone
		}
		if v.listErr != nil {
			t.requeue(r, now)
			continue
		}
		var present []string
		for _, id := range r.ids {
			if x := v.byID[id]; x != nil && !x.gone {
				present = append(present, id)
			}
		}
		if len(present) == 0 {
			continue
		}
		if _, err := t.giveUp(ctx, v, present, 0, r.reason, now); err != nil {
			// giveUp queued it afresh; carry the attempt count on.
			t.mu.Lock()
			if n := len(t.removals); n > 0 {
				last := t.removals[n-1]
				last.attempts = r.attempts + 1
				last.next = now.Add(retryWait(last.attempts))
			}
			t.mu.Unlock()
			continue
		}
		klog.FromContext(ctx).Info("Removed instances after a retry", "nodeGroup", r.group, "instances", present, "attempts", r.attempts+1)
	}
}

func (t *Tracker) requeue(r *removal, now time.Time) {
	r.attempts++
	r.next = now.Add(retryWait(r.attempts))
	t.mu.Lock()
	t.removals = append(t.removals, r)
	t.mu.Unlock()
}

func retryWait(attempts int) time.Duration {
	d := removalRetryBase
	for i := 1; i < attempts && d < removalRetryMax; i++ {
		d *= 2
	}
	return min(d, removalRetryMax)
}
