// Package upkeep acts on a pass's count of the reservations: events on
// invalid CapacityReservation objects, their status, and the drain and
// uncordon of the nodes of capacity blocks about to end. Counting is
// pkg/reservations' job; this package only writes.
package upkeep

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// Event reasons on CapacityReservation objects.
const (
	EventInvalid  = "InvalidCapacityReservation"
	EventDraining = "DrainingCapacityBlock"
	// EventDrainHeld: the safety gate holds a block's drain back (the
	// cluster is unhealthy); it goes on once the gate allows it.
	EventDrainHeld = "CapacityBlockDrainHeld"
	// EventDrainHeldForGroup: draining the node would split a PodGroup or
	// CompositePodGroup whose members may only be disrupted together; it
	// goes on once the group's other nodes drain too.
	EventDrainHeldForGroup = "CapacityBlockDrainHeldForGroup"
)

// Evictor evicts one pod without waiting for it to go: the scale-down
// drainer (drain.Drainer), so block drains obey the same grace period cap
// and count as the same evictions.
type Evictor interface {
	EvictNow(ctx context.Context, pod *corev1.Pod) error
}

// Keeper keeps the reservations' objects and nodes in line with the
// count. What it has already reported lives across passes.
type Keeper struct {
	client   kubernetes.Interface
	dyn      dynamic.Interface
	recorder record.EventRecorder
	evictor  Evictor
	// gate is asked before a node is cordoned and drained (nil: never
	// held back).
	gate *safety.Gate

	// warned holds the uid/generation of invalid objects already reported.
	warned map[string]bool
	// draining holds the nodes already reported as draining; held those
	// whose drain the gate holds back, already reported.
	draining map[string]bool
	held     map[string]bool
}

// New returns a keeper. Any part may be nil: no client, no drain or
// uncordon; no dyn, no status; no recorder, no events; no evictor, no
// drain.
func New(client kubernetes.Interface, dyn dynamic.Interface, recorder record.EventRecorder, evictor Evictor) *Keeper {
	return &Keeper{client: client, dyn: dyn, recorder: recorder, evictor: evictor, warned: map[string]bool{}, draining: map[string]bool{},
		held: map[string]bool{}}
}

// WithGate has the keeper ask g before it cordons and drains a node.
func (k *Keeper) WithGate(g *safety.Gate) *Keeper {
	k.gate = g
	return k
}

// Run acts on a count: events about invalid objects, the objects'
// status, the drain of the nodes of blocks about to end and, when the
// count is complete, the uncordon of those drained for a block that no
// longer ends. gangs are the pods' groups, which a drain must not split
// (nil: the pods belong to none). Failures are logged and retried in the
// next pass.
func (k *Keeper) Run(ctx context.Context, c *reservations.Count, pods []*corev1.Pod, gangs *drainability.Gangs) {
	if k == nil || c == nil {
		return
	}
	if gangs == nil {
		gangs = drainability.NewGangs(nil, nil, nil)
	}
	k.reportRejected(ctx, c.Rejected(), c.Book)
	k.writeStatus(ctx, c.Objects(), c.Book)
	k.drain(ctx, c.Book, c.Objects(), pods, gangs)
	if c.Complete() {
		k.uncordon(ctx, c.Book)
	}
}
