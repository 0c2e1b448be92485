// Package act carries out a scale-up plan through the cloud provider and
// hands every request it made to the tracker; a group whose request fails
// is backed off at once so the next loop plans around it.
package act

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Gang names the gang (namespace/name) this is part of; the parts of
	// one gang succeed together or are all undone.
	Gang string
	Pods []*corev1.Pod
}

// Result is what came of one ScaleUp.
type Result struct {
	ScaleUp
	// Added is how far the target really grew (less than Delta on a
	// partial failure).
	Added int
	Err   error
	// instances are the provider ids that appeared with this scale-up.
	instances []string
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

// Execute performs the scale-ups in order. The parts of one gang come as
// one unit: when a part fails, the nodes the others added are removed
// again, so no part of a gang is left half provisioned.
func (a *Actuator) Execute(ctx context.Context, ups []ScaleUp, now time.Time) []Result {
	results := make([]Result, 0, len(ups))
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

func (a *Actuator) unit(ctx context.Context, parts []ScaleUp, now time.Time) []Result {
	results := make([]Result, 0, len(parts))
	failed := false
	for _, up := range parts {
		r := a.one(ctx, up, now)
		results = append(results, r)
		if r.Err != nil {
			failed = true
			break
		}
	}
	if !failed || len(parts) == 1 && results[0].Added == 0 {
		return results
	}
	logger := klog.FromContext(ctx).WithValues("gang", parts[0].Gang)
	a.tracker.ForgetGang(parts[0].Gang)
	for i := range results {
		r := &results[i]
		if len(r.instances) == 0 {
			continue
		}
		nodes := make([]*corev1.Node, 0, len(r.instances))
		for _, id := range r.instances {
			nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: id}})
		}
		if err := r.Group.Group.ForceDeleteNodes(ctx, nodes); err != nil {
			logger.Error(err, "Undoing a part of a failed gang scale-up failed", "nodeGroup", r.Group.Id, "instances", r.instances)
			continue
		}
		a.tracker.Requested(r.Group.Id, -r.Added, now)
		logger.Info("Undid a part of a failed gang scale-up", "nodeGroup", r.Group.Id, "removed", len(nodes))
		if r.Err == nil {
			r.Err = fmt.Errorf("node group %s: undone because another part of gang %s failed", r.Group.Id, r.Gang)
		}
		r.Added = 0
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
	var created []string
	if up.Atomic {
		created, err = g.AtomicIncreaseSize(ctx, up.Delta)
	} else {
		created, err = g.IncreaseSize(ctx, up.Delta)
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
	if up.Gang != "" {
		a.tracker.RequestedGang(up.Gang, up.Group.Id, created, now)
	} else {
		created = nil // only a gang's parts are undone together
	}
	if err != nil {
		a.backoff.Fail(up.Group.Id, track.ReasonCloudProvider, now)
		logger.Error(err, "Scale-up failed; node group backed off", "added", added)
		return Result{ScaleUp: up, Added: added, instances: created, Err: fmt.Errorf("node group %s: increase by %d: %w", up.Group.Id, up.Delta, err)}
	}
	logger.Info("Scale-up", "from", before, "to", before+added, "pods", len(up.Pods), "gang", up.Gang)
	return Result{ScaleUp: up, Added: added, instances: created}
}
