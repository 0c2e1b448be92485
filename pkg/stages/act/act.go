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
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/track"
)

// ScaleUp is one decision: grow Group by Delta for Pods.
type ScaleUp struct {
	Group *nodegroups.Info
	Delta int
	// Atomic asks the provider for all Delta nodes or none.
	Atomic bool
	Pods   []*corev1.Pod
}

// Result is what came of one ScaleUp.
type Result struct {
	ScaleUp
	// Added is how far the target really grew (less than Delta on a
	// partial failure).
	Added int
	Err   error
}

// Actuator talks to the provider.
type Actuator struct {
	tracker *track.Tracker
	backoff *backoff.Backoff
}

// New returns an actuator recording into tracker and backoff.
func New(t *track.Tracker, b *backoff.Backoff) *Actuator {
	return &Actuator{tracker: t, backoff: b}
}

// Execute performs the scale-ups in order.
func (a *Actuator) Execute(ctx context.Context, ups []ScaleUp, now time.Time) []Result {
	results := make([]Result, 0, len(ups))
	for _, up := range ups {
		results = append(results, a.one(ctx, up, now))
	}
	return results
}

func (a *Actuator) one(ctx context.Context, up ScaleUp, now time.Time) Result {
	logger := klog.FromContext(ctx).WithValues("nodeGroup", up.Group.Id, "delta", up.Delta, "atomic", up.Atomic)
	g := up.Group.Group
	before, err := g.TargetSize()
	if err != nil {
		return Result{ScaleUp: up, Err: fmt.Errorf("node group %s: target size: %w", up.Group.Id, err)}
	}
	if up.Atomic {
		err = g.AtomicIncreaseSize(up.Delta)
	} else {
		err = g.IncreaseSize(up.Delta)
	}
	after, terr := g.TargetSize()
	added := 0
	if terr == nil {
		added = max(after-before, 0)
	} else if err == nil {
		added = up.Delta
	}
	// Whatever was added is tracked, even on a partial failure, so it is
	// given up cleanly if it never registers.
	a.tracker.Requested(up.Group.Id, added, now)
	if err != nil {
		a.backoff.Fail(up.Group.Id, track.ReasonCloudProvider, now)
		logger.Error(err, "Scale-up failed; node group backed off", "added", added)
		return Result{ScaleUp: up, Added: added, Err: fmt.Errorf("node group %s: increase by %d: %w", up.Group.Id, up.Delta, err)}
	}
	logger.Info("Scale-up", "from", before, "to", before+added, "pods", len(up.Pods))
	return Result{ScaleUp: up, Added: added}
}
