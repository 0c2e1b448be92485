// Package actuator removes the nodes a scale-down plan chose. Every node
// is tainted first, synchronously, so the scheduler stops placing pods
// there before the loop goes on; draining and deleting then run in the
// background, because evictions take as long as the pods' grace periods
// and the loop must keep scaling up meanwhile. Empty nodes of one group
// go in one DeleteNodes call. A removal that fails is untainted and
// reported, and the nodes already on their way out are never planned
// twice.
package actuator

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// Deletion is one node to remove.
type Deletion struct {
	Node  *corev1.Node
	Group cloudprovider.NodeGroup
	// Evict are the pods to evict first; none for an empty node.
	Evict []*corev1.Pod
}

// RemovalOutcome is how a removal ended.
type RemovalOutcome struct {
	Node, Group string
	// Empty tells an empty node from a drained one.
	Empty bool
	// Stage is where it failed (taint, drain, delete); empty on success.
	Stage string
	Err   error
	At    time.Time
}

// Options are the removal's upstream flags.
type Options struct {
	// Cordon marks nodes unschedulable with their deletion taint
	// (--cordon-node-before-terminating).
	Cordon bool
	// EvictDaemonSetsOfEmpty and EvictDaemonSetsOfDrained evict the
	// node's DaemonSet pods, best effort and without waiting, right
	// before an empty, respectively drained, node is deleted
	// (--daemonset-eviction-for-empty-nodes, -for-occupied-nodes).
	EvictDaemonSetsOfEmpty   bool
	EvictDaemonSetsOfDrained bool
}

// Remover carries out removals.
type Remover struct {
	opts     Options
	client   kubernetes.Interface
	drainer  *drain.Drainer
	recorder record.EventRecorder
	clock    clock.Clock

	mu       sync.Mutex
	deleting map[string]bool // node -> being drained (not empty)
	done     []RemovalOutcome
	wg       sync.WaitGroup
}

// New returns an actuator.
func New(client kubernetes.Interface, drainer *drain.Drainer, recorder record.EventRecorder, c clock.Clock, opts Options) *Remover {
	return &Remover{opts: opts, client: client, drainer: drainer, recorder: recorder, clock: c, deleting: map[string]bool{}}
}

// Deleting returns the nodes whose removal is under way and how many of
// them are being drained.
func (a *Remover) Deleting() (map[string]bool, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]bool, len(a.deleting))
	drains := 0
	for n, d := range a.deleting {
		out[n] = true
		if d {
			drains++
		}
	}
	return out, drains
}

// Collect returns the removals that ended since the last call.
func (a *Remover) Collect() []RemovalOutcome {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.done
	a.done = nil
	return out
}

// Wait blocks until every removal started has ended (for tests and
// shutdown).
func (a *Remover) Wait() { a.wg.Wait() }

// Start taints the nodes and starts their removal: the empty nodes of a
// group together, each node to drain on its own. It returns the outcomes
// of the nodes that could not even be tainted; the others come through
// Collect.
func (a *Remover) Start(ctx context.Context, empty, drained []Deletion) []RemovalOutcome {
	var failed []RemovalOutcome
	now := a.clock.Now()
	taint := func(d Deletion, draining bool) bool {
		if _, err := drain.Mark(ctx, a.client, d.Node.Name, now, a.opts.Cordon); err != nil {
			failed = append(failed, RemovalOutcome{Node: d.Node.Name, Group: d.Group.Id(), Empty: !draining, Stage: "taint", Err: err, At: now})
			a.recorder.Eventf(d.Node, corev1.EventTypeWarning, "ScaleDownFailed", "failed to mark the node for deletion: %v", err)
			return false
		}
		a.recorder.Event(d.Node, corev1.EventTypeNormal, "ScaleDown", "marked the node as toBeDeleted/unschedulable")
		a.mu.Lock()
		a.deleting[d.Node.Name] = draining
		a.mu.Unlock()
		return true
	}
	byGroup := map[string][]Deletion{}
	var order []string
	for _, d := range empty {
		if !taint(d, false) {
			continue
		}
		id := d.Group.Id()
		if byGroup[id] == nil {
			order = append(order, id)
		}
		byGroup[id] = append(byGroup[id], d)
	}
	for _, id := range order {
		batch := byGroup[id]
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.removeEmpty(ctx, batch)
		}()
	}
	for _, d := range drained {
		if !taint(d, true) {
			continue
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.removeDrained(ctx, d)
		}()
	}
	return failed
}

// removeEmpty deletes a group's empty nodes in one call, after checking
// that no pod was bound to them between the plan and the taint.
func (a *Remover) removeEmpty(ctx context.Context, batch []Deletion) {
	var ready []Deletion
	for _, d := range batch {
		if err := a.stillEmpty(ctx, d.Node.Name); err != nil {
			a.fail(ctx, d, true, "drain", err)
			continue
		}
		ready = append(ready, d)
	}
	if len(ready) == 0 {
		return
	}
	nodes := make([]*corev1.Node, len(ready))
	for i, d := range ready {
		nodes[i] = d.Node
		if a.opts.EvictDaemonSetsOfEmpty {
			a.evictDaemonSets(ctx, d.Node.Name)
		}
	}
	if err := ready[0].Group.DeleteNodes(ctx, nodes); err != nil {
		for _, d := range ready {
			a.fail(ctx, d, true, "delete", fmt.Errorf("node group %s: %w", d.Group.Id(), err))
		}
		return
	}
	for _, d := range ready {
		a.succeed(ctx, d, true)
	}
}

// removeDrained evicts the node's pods, then deletes it.
func (a *Remover) removeDrained(ctx context.Context, d Deletion) {
	if err := a.drainer.Drain(ctx, d.Node.Name, d.Evict); err != nil {
		a.fail(ctx, d, false, "drain", err)
		return
	}
	// A pod bound between the plan and the taint was not evicted; it
	// must not die with the node.
	if err := a.stillEmpty(ctx, d.Node.Name); err != nil {
		a.fail(ctx, d, false, "drain", err)
		return
	}
	if a.opts.EvictDaemonSetsOfDrained {
		a.evictDaemonSets(ctx, d.Node.Name)
	}
	if err := d.Group.DeleteNodes(ctx, []*corev1.Node{d.Node}); err != nil {
		a.fail(ctx, d, false, "delete", fmt.Errorf("node group %s: %w", d.Group.Id(), err))
		return
	}
	a.succeed(ctx, d, false)
}

// stillEmpty lists the node's pods afresh: a pod bound after the plan
// was made would otherwise die with the node.
func (a *Remover) stillEmpty(ctx context.Context, node string) error {
	left, err := drainability.Remaining(ctx, a.client, node)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("pod %s was bound to node %s after the plan", left[0], node)
	}
	return nil
}

// evictDaemonSets asks once for the eviction of the node's DaemonSet pods
// so they end gracefully rather than with the node. It does not wait and
// a refusal is only logged: the node goes anyway, as upstream's does.
func (a *Remover) evictDaemonSets(ctx context.Context, node string) {
	logger := klog.FromContext(ctx)
	pods, err := drainability.DaemonSetPods(ctx, a.client, node)
	if err != nil {
		logger.Error(err, "Listing DaemonSet pods to evict", "node", node)
		return
	}
	for _, p := range pods {
		if err := a.drainer.EvictNow(ctx, p); err != nil {
			logger.Error(err, "DaemonSet pod eviction failed; it ends with its node", "node", node, "pod", klog.KObj(p))
		}
	}
}

func (a *Remover) succeed(ctx context.Context, d Deletion, empty bool) {
	klog.FromContext(ctx).Info("Scaled down node", "node", d.Node.Name, "nodeGroup", d.Group.Id(), "empty", empty, "evicted", len(d.Evict))
	a.recorder.Eventf(d.Node, corev1.EventTypeNormal, "ScaleDown", "node removed by cluster autoscaler (node group %s)", d.Group.Id())
	a.finish(RemovalOutcome{Node: d.Node.Name, Group: d.Group.Id(), Empty: empty, At: a.clock.Now()})
}

// fail untaints the node (with a context of its own: the loop's may be
// ending) and reports.
func (a *Remover) fail(ctx context.Context, d Deletion, empty bool, stage string, err error) {
	klog.FromContext(ctx).Error(err, "Scale-down failed; untainting the node", "node", d.Node.Name, "nodeGroup", d.Group.Id(), "stage", stage)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if uerr := drain.Untaint(uctx, a.client, d.Node.Name); uerr != nil {
		klog.FromContext(ctx).Error(uerr, "Could not untaint node after a failed scale-down", "node", d.Node.Name)
	}
	a.recorder.Eventf(d.Node, corev1.EventTypeWarning, "ScaleDownFailed", "failed to remove the node (%s): %v", stage, err)
	a.finish(RemovalOutcome{Node: d.Node.Name, Group: d.Group.Id(), Empty: empty, Stage: stage, Err: err, At: a.clock.Now()})
}

func (a *Remover) finish(o RemovalOutcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.deleting, o.Node)
	a.done = append(a.done, o)
}
