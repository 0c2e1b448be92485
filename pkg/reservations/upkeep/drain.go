package upkeep

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// drain moves the pods off the nodes of capacity blocks that end within
// the margin: the node is cordoned and each pod that would still run at
// the block's end is evicted (the Eviction API, so disruption budgets
// hold), so that its controller recreates it and the planner finds it a
// node elsewhere. Pods that declare they finish before the end stay, and
// a node with nothing to move is left as it is. A drain that would split
// a group whose members may only be disrupted together (gangs) is held
// back, whole: the group's nodes drain when they all can. Failures are
// retried in the next loop.
func (k *Keeper) drain(ctx context.Context, b *reservations.Book, objs []reservations.Object, pods []*corev1.Pod, gangs *drainability.Gangs) {
	if k.client == nil || k.evictor == nil {
		return
	}
	logger := klog.FromContext(ctx)
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	// Only nodes still draining (or held) are remembered, so the sets
	// stay small.
	reported, held := map[string]bool{}, map[string]bool{}
	defer func() { k.draining, k.held = reported, held }()
	// First what the gate allows, then, over all of it at once, what
	// splits no group: nodes of one gang may end in different blocks.
	type nodeDrain struct {
		slot *reservations.Slot
		node *corev1.Node
		move []*corev1.Pod
	}
	var drains []nodeDrain
	leaving := map[string][]*corev1.Pod{}
	for _, slot := range b.Slots() {
		if !slot.Started(b.Now()) || !slot.Ending(b.Now(), b.Margin()) {
			continue
		}
		for _, node := range slot.Nodes {
			move := mustMove(byNode[node.Name], slot.End, b.Now())
			if len(move) == 0 {
				continue
			}
			key := node.Name + "/" + slot.ID
			if r := k.gate.Allow(safety.ActionBlockDrain, safety.Target{Node: node}); r != nil {
				held[key] = true
				if !k.held[key] {
					logger.Info("Drain of a node of an ending capacity block held back by the safety gate", "node", node.Name, "reservation", slot.ID, "rule", r.Rule, "detail", r.Detail)
					k.event(slot.Reservation, corev1.EventTypeWarning, EventDrainHeld,
						fmt.Sprintf("Capacity block ends at %s: drain of node %s held back (%s): %s", slot.End.UTC().Format(time.RFC3339), node.Name, r.Rule, r.Detail))
				}
				continue
			}
			drains = append(drains, nodeDrain{slot: slot, node: node, move: move})
			leaving[node.Name] = append(leaving[node.Name], move...)
		}
	}
	split := gangs.Hold(leaving)
	for _, d := range drains {
		slot, node, move := d.slot, d.node, d.move
		key := node.Name + "/" + slot.ID
		if why, ok := split[node.Name]; ok {
			// Marked apart from the gate's holds, so each is told once.
			held[key+"/group"] = true
			if !k.held[key+"/group"] {
				logger.Info("Drain of a node of an ending capacity block held back: it would split a group disrupted only together", "node", node.Name, "reservation", slot.ID, "detail", why)
				k.event(slot.Reservation, corev1.EventTypeWarning, EventDrainHeldForGroup,
					fmt.Sprintf("Capacity block ends at %s: drain of node %s held back: %s", slot.End.UTC().Format(time.RFC3339), node.Name, why))
			}
			continue
		}
		if !node.Spec.Unschedulable {
			if err := cordon(ctx, k, node.Name, slot.ID); err != nil {
				logger.Error(err, "Cordoning a node of an ending capacity block failed", "node", node.Name, "reservation", slot.ID)
				continue
			}
		}
		reported[key] = true
		if !k.draining[key] {
			logger.Info("Draining a node of an ending capacity block", "node", node.Name, "reservation", slot.ID, "end", slot.End, "pods", len(move))
			k.event(slot.Reservation, corev1.EventTypeNormal, EventDraining,
				fmt.Sprintf("Capacity block ends at %s: node %s cordoned, %d pod(s) evicted to run elsewhere", slot.End.UTC().Format(time.RFC3339), node.Name, len(move)))
		}
		for _, p := range move {
			if err := evict(ctx, k, p); err != nil {
				logger.V(2).Info("Eviction refused; retried next loop", "pod", klog.KObj(p), "node", node.Name, "err", err)
			}
		}
	}
}

// mustMove are the pods of a node that still run at end: not DaemonSet or
// static pods, not finished, not already going, and not declaring a run
// that ends in time.
func mustMove(pods []*corev1.Pod, end, now time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "DaemonSet" {
			continue
		}
		if d, ok := reservations.ExpectedRuntime(p); ok && !startOf(p, now).Add(d).After(end) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// startOf is when the pod started running (bound, if the kubelet has not
// said), or now when nothing says.
func startOf(p *corev1.Pod, now time.Time) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return now
}

// cordon marks the node unschedulable and as cordoned by us, for the
// block id, in one patch: only a cordon carrying the mark is ever lifted.
func cordon(ctx context.Context, k *Keeper, node, id string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{AnnotationCordonedBy: cordonMark(id)}},
		"spec":     map[string]any{"unschedulable": true},
	})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func evict(ctx context.Context, k *Keeper, p *corev1.Pod) error {
	return k.evictor.EvictNow(ctx, p)
}
