// Package act carries out a scale-up plan through the cloud provider and
// hands every request it made to the tracker; a group whose request fails
// is backed off at once so the next loop plans around it.
package act

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
)

// ScaleUp is one decision: grow Group by Delta for Pods.
type ScaleUp struct {
	Group *nodegroups.Info
	Delta int
	// Atomic asks the provider for all Delta nodes or none.
	Atomic bool
	// Gang names the gang (namespace/name) this is part of; the parts of
	// one gang succeed together or are all undone.
	Gang string
	Pods []*corev1.Pod
	// Nodes are Pods as the plan placed them: the pods of each new node,
	// in the order the simulation opened the nodes. Nil when the plan
	// does not say (nominations then have nothing to go on).
	Nodes [][]*corev1.Pod
}

// LaunchResult is what came of one ScaleUp.
type LaunchResult struct {
	ScaleUp
	// Added is how far the target really grew (less than Delta on a
	// partial failure).
	Added int
	Err   error
	// Instances are the ids of the instances the provider said it
	// created (none when it did not name them).
	Instances []string
}

// Launcher talks to the provider.
type Launcher struct {
	tracker *track.Tracker
	backoff *backoff.Backoff
}

// New returns an actuator recording into tracker and backoff.
func New(t *track.Tracker, b *backoff.Backoff) *Launcher {
	return &Launcher{tracker: t, backoff: b}
}

// Execute performs the scale-ups in order. The parts of one gang come as
// one unit: when a part fails, the nodes the others added are removed
// again, so no part of a gang is left half provisioned.
func (a *Launcher) Execute(ctx context.Context, ups []ScaleUp, now time.Time) []LaunchResult {
	results := make([]LaunchResult, 0, len(ups))
	for i := 0; i < len(ups); {
		j := i + 1
		for ups[i].Gang != "" && j < len(ups) && ups[j].Gang == ups[i].Gang {
			j++
		}
		results = append(results, a.unit(ctx, ups[i:j], now)...)
		i = j
	}
	return results
}

func (a *Launcher) unit(ctx context.Context, parts []ScaleUp, now time.Time) []LaunchResult {
	var attempt uint64
	if parts[0].Gang != "" {
		// Each try of a gang has its own deadline.
		attempt = a.tracker.StartGang(parts[0].Gang, now)
	}
	results := make([]LaunchResult, 0, len(parts))
	failed := false
	for _, up := range parts {
		r := a.one(ctx, up, attempt, now)
		results = append(results, r)
		if r.Err != nil {
			failed = true
			break
		}
	}
	if !failed || attempt == 0 {
		return results
	}
	// A part failed: the nodes the others added are given up at once,
	// through the tracker's rules (only the instances this attempt
	// created; a registered node that took other pods is released).
	groups := make([]*nodegroups.Info, 0, len(results))
	for _, r := range results {
		groups = append(groups, r.Group)
	}
	a.tracker.UndoGang(ctx, attempt, groups, now)
	for i := range results {
		r := &results[i]
		if r.Added == 0 {
			continue
		}
		klog.FromContext(ctx).Info("Undid a part of a failed gang scale-up", "gang", r.Gang, "nodeGroup", r.Group.Id, "removed", r.Added)
		if r.Err == nil {
			r.Err = fmt.Errorf("node group %s: undone because another part of gang %s failed", r.Group.Id, r.Gang)
		}
		r.Added = 0
	}
	return results
}

func (a *Launcher) one(ctx context.Context, up ScaleUp, attempt uint64, now time.Time) LaunchResult {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", up.Group.Id, "delta", up.Delta, "atomic", up.Atomic)
	g := up.Group.Group
	before, err := g.TargetSize()
	if err != nil {
		return LaunchResult{ScaleUp: up, Err: fmt.Errorf("node group %s: target size: %w", up.Group.Id, err)}
	}
	var created []string
	if up.Atomic {
		created, err = g.AtomicIncreaseSize(ctx, up.Delta)
	} else {
		created, err = g.IncreaseSize(ctx, up.Delta)
	}
	after, terr := g.TargetSize()
	added := 0
	switch {
	case terr == nil:
		added = max(after-before, 0)
	case err == nil:
		added = up.Delta
	default:
		added = len(created)
	}
	// Whatever was added is tracked, even on a partial failure, so it is
	// given up cleanly if it never becomes usable; by the ids the provider
	// returned, never by guessing which instances are new.
	a.tracker.Launched(track.Request{Group: up.Group.Id, Delta: max(added, len(created)), Gang: up.Gang, Attempt: attempt, Instances: created,
		MaxProvision: up.Group.Options.MaxNodeProvisionTime}, now)
	if err != nil {
		a.backoff.Fail(up.Group.Id, track.ReasonCloudProvider, now)
		logger.Error(err, "Scale-up failed; node group backed off", "added", added)
		return LaunchResult{ScaleUp: up, Added: added, Err: fmt.Errorf("node group %s: increase by %d: %w", up.Group.Id, up.Delta, err), Instances: created}
	}
	logger.Info("Scale-up", "from", before, "to", before+added, "pods", len(up.Pods), "gang", up.Gang)
	return LaunchResult{ScaleUp: up, Added: added, Instances: created}
}
