package clusterapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

var (
	_ cloudprovider.NodeGroup        = &nodeGroup{}
	_ cloudprovider.ReservationNamer = &nodeGroup{}
)

// nodeGroup is one MachineDeployment, MachineSet or MachinePool. Its
// object lives on across Refreshes; state (guarded by p.mu) is nil once
// the resource is gone or no longer autoscaled.
type nodeGroup struct {
	p               *Provider
	id, kind        string
	namespace, name string
	gvr             schema.GroupVersionResource
	state           *groupState
	written         *written
	// scaleMu serializes the group's scale calls: each reads replicas,
	// then writes them.
	scaleMu sync.Mutex
	// lowered are the Machines (by UID) a DeleteNodes of this process
	// already took off replicas, so a retry never lowers twice.
	lowered map[types.UID]bool
}

// written is the replicas this process set, until the informer shows
// the write (TargetSize must see it at once: the caller compares it
// before and after a scale-up).
type written struct {
	replicas int
	// rv is the resourceVersion the write returned, before the one the
	// informer had when it was made: any other version the informer
	// shows is the write or newer.
	rv, before string
	at         time.Time
}

// writtenTTL is how long a write stands in for an informer that does not
// catch up (its watch broke): after that the cache is believed again.
const writtenTTL = time.Minute

func (g *nodeGroup) Id() string { return g.id }

func (g *nodeGroup) MinSize() int {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if g.state == nil {
		return 0
	}
	return g.state.min
}

func (g *nodeGroup) MaxSize() int {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if g.state == nil {
		return 0
	}
	return g.state.max
}

func (g *nodeGroup) ref() string { return g.kind + " " + g.namespace + "/" + g.name }

// TargetSize is spec.replicas as the informer has it, or the replicas
// this process just wrote. A group whose resource is gone has 0, so that
// the loop goes on for the others.
func (g *nodeGroup) TargetSize() (int, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.targetLocked(), nil
}

func (g *nodeGroup) targetLocked() int {
	if g.state == nil {
		return 0
	}
	g.settleLocked()
	if g.written != nil {
		return g.written.replicas
	}
	return specReplicas(g.state.obj)
}

// settleLocked forgets the write once the informer shows it (or a newer
// version), or after writtenTTL.
func (g *nodeGroup) settleLocked() {
	w := g.written
	if w == nil || g.state == nil {
		return
	}
	rv := g.state.obj.GetResourceVersion()
	if rv == w.rv || rv != w.before || specReplicas(g.state.obj) == w.replicas || g.p.clock.Since(w.at) > writtenTTL {
		g.written = nil
	}
}

func specReplicas(u *unstructured.Unstructured) int {
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return int(n)
}

func (g *nodeGroup) Debug() string {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if g.state == nil {
		return g.id + " (gone)"
	}
	return fmt.Sprintf("%s (min %d, max %d, target %d)", g.id, g.state.min, g.state.max, g.targetLocked())
}

// current is the group's state, or an error naming it when it is gone.
func (g *nodeGroup) current() (*groupState, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	if g.state == nil {
		return nil, fmt.Errorf("node group %s: the %s is gone or no longer autoscaled", g.id, g.ref())
	}
	return g.state, nil
}

// IncreaseSize raises replicas by delta through the scale subresource. It
// names no instance: Cluster API creates the Machines afterwards (the
// tracker counts them).
func (g *nodeGroup) IncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return nil, g.increase(ctx, delta)
}

// AtomicIncreaseSize is IncreaseSize: the whole delta is requested in one
// write or not at all (it would exceed the max size, the write fails).
// Cluster API has no all-or-nothing creation, so Machines may still fail
// one by one afterwards; the autoscaler's gang rollback watches the
// increase and removes what holds no work (docs/providers/clusterapi.md).
func (g *nodeGroup) AtomicIncreaseSize(ctx context.Context, delta int) ([]string, error) {
	return nil, g.increase(ctx, delta)
}

func (g *nodeGroup) increase(ctx context.Context, delta int) error {
	if delta <= 0 {
		return fmt.Errorf("node group %s: size increase must be positive, got %d", g.id, delta)
	}
	st, err := g.current()
	if err != nil {
		return err
	}
	if v, ok := st.obj.GetAnnotations()[cloudprovider.AnnotationUnitSize]; ok {
		if unit, err := strconv.Atoi(v); err == nil && unit > 1 && delta%unit != 0 {
			return fmt.Errorf("node group %s: size increase by %d refused: %s says it grows in whole units of %d", g.id, delta, cloudprovider.AnnotationUnitSize, unit)
		}
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	from, err := g.writeReplicas(ctx, func(replicas int) (int, error) {
		if replicas+delta > st.max {
			return 0, fmt.Errorf("node group %s: size increase too large - desired:%d max:%d", g.id, replicas+delta, st.max)
		}
		return replicas + delta, nil
	})
	if err != nil {
		return err
	}
	g.p.logger.Info("Increased node group", "nodeGroup", g.id, "from", from, "to", from+delta)
	return nil
}

// scaleReplicas reads spec.replicas from the scale subresource (fresh, not
// the cache: the write that follows builds on it), with the resource's
// resourceVersion for that write's precondition.
func (g *nodeGroup) scaleReplicas(ctx context.Context) (int, string, error) {
	s, err := g.p.dyn.Resource(g.gvr).Namespace(g.namespace).Get(ctx, g.name, metav1.GetOptions{}, "scale")
	if err != nil {
		return 0, "", fmt.Errorf("node group %s: reading the scale of %s: %w", g.id, g.ref(), err)
	}
	n, _, err := unstructured.NestedInt64(s.Object, "spec", "replicas")
	if err != nil {
		return 0, "", fmt.Errorf("node group %s: scale of %s: spec.replicas: %v", g.id, g.ref(), err)
	}
	return int(n), s.GetResourceVersion(), nil
}

// replicaWriteAttempts bounds the re-reads after a conflicting write.
const replicaWriteAttempts = 5

// writeReplicas reads replicas, asks decide for the new value and writes
// it on the condition that nothing changed the resource since the read.
// When someone did (a person, GitOps, another controller), the write
// conflicts and the whole decision is taken again on a fresh read, so
// their change is never overwritten. It returns the replicas the
// successful decision started from.
func (g *nodeGroup) writeReplicas(ctx context.Context, decide func(replicas int) (int, error)) (int, error) {
	var last error
	for range replicaWriteAttempts {
		replicas, rv, err := g.scaleReplicas(ctx)
		if err != nil {
			return 0, err
		}
		n, err := decide(replicas)
		if err != nil {
			return 0, err
		}
		err = g.setReplicas(ctx, n, rv)
		if err == nil {
			return replicas, nil
		}
		if !apierrors.IsConflict(err) {
			return 0, err
		}
		last = err
		g.p.logger.V(2).Info("Replicas changed since they were read; deciding again", "nodeGroup", g.id, "err", err)
	}
	return 0, fmt.Errorf("node group %s: replicas of %s kept changing, %d attempts: %w", g.id, g.ref(), replicaWriteAttempts, last)
}

// setReplicas writes spec.replicas through the scale subresource (a merge
// patch; 0 is sent, not omitted), preconditioned on resourceVersion rv.
func (g *nodeGroup) setReplicas(ctx context.Context, n int, rv string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"replicas":%d}}`, rv, n)
	s, err := g.p.dyn.Resource(g.gvr).Namespace(g.namespace).Patch(ctx, g.name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale")
	if err != nil {
		return fmt.Errorf("node group %s: setting replicas of %s to %d: %w", g.id, g.ref(), n, err)
	}
	g.p.mu.Lock()
	g.written = &written{replicas: n, rv: s.GetResourceVersion(), at: g.p.clock.Now()}
	if g.state != nil {
		g.written.before = g.state.obj.GetResourceVersion()
	}
	g.p.mu.Unlock()
	return nil
}

// DeleteNodes marks the nodes' Machines for deletion and lowers replicas
// by the number of Machines not already taken off, never below the min
// size. Safe to retry: a Machine already deleting, or marked and already
// taken off replicas, is not counted again.
func (g *nodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	return g.deleteNodes(ctx, nodes, false)
}

// ForceDeleteNodes is DeleteNodes without the min size check (for
// instances that never became usable).
func (g *nodeGroup) ForceDeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	return g.deleteNodes(ctx, nodes, true)
}

func (g *nodeGroup) deleteNodes(ctx context.Context, nodes []*corev1.Node, force bool) error {
	st, err := g.current()
	if err != nil {
		return err
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	g.p.mu.Lock()
	snap := g.p.snap
	g.p.mu.Unlock()
	victims := map[string]*unstructured.Unstructured{}
	for _, n := range nodes {
		if other := snap.groupOfNode(n, g.p.keys); other != g.id {
			return fmt.Errorf("node group %s: node %s does not belong to it (it belongs to %q)", g.id, n.Name, other)
		}
		m := snap.machineOfNode(n, g.p.keys)
		if m == nil {
			// A MachinePool instance without a Machine: lowering replicas
			// would let the pool pick any instance, maybe a busy one.
			return fmt.Errorf("node group %s: node %s has no Machine, so it cannot be chosen for deletion (MachinePool without MachinePool Machines)", g.id, n.Name)
		}
		victims[m.GetNamespace()+"/"+m.GetName()] = m
	}
	replicas, _, err := g.scaleReplicas(ctx)
	if err != nil {
		return err
	}
	// A Machine marked before and not yet deleted was taken off replicas
	// if the group still has more Machines than replicas: Cluster API
	// deletes marked Machines first.
	live := 0
	for _, m := range st.machines {
		if !deleting(m) {
			live++
		}
	}
	surplus := max(live-replicas, 0)
	var toMark []*unstructured.Unstructured
	lower := 0
	for _, key := range slices.Sorted(maps.Keys(victims)) {
		m := victims[key]
		switch {
		case deleting(m), g.lowered[m.GetUID()]:
			continue
		}
		if _, ok := m.GetAnnotations()[g.p.keys.deleteMachine]; ok && surplus > 0 {
			surplus-- // an earlier call's decrement that Cluster API has not acted on yet
			continue
		}
		if _, ok := m.GetAnnotations()[g.p.keys.deleteMachine]; !ok {
			toMark = append(toMark, m)
		}
		lower++
	}
	if lower == 0 {
		return nil
	}
	bounded := func(replicas int) (int, error) {
		if !force && replicas-lower < st.min {
			return 0, fmt.Errorf("node group %s: deleting %d node(s) would take replicas from %d below the min size %d", g.id, lower, replicas, st.min)
		}
		if replicas-lower < 0 {
			return 0, fmt.Errorf("node group %s: deleting %d node(s) would take replicas below 0 (replicas %d)", g.id, lower, replicas)
		}
		return replicas - lower, nil
	}
	if _, err := bounded(replicas); err != nil {
		return err
	}
	var done []*unstructured.Unstructured
	for _, m := range toMark {
		if err := g.mark(ctx, m, true); err != nil {
			g.unmark(ctx, done)
			return err
		}
		done = append(done, m)
	}
	// Cluster API's MachineSet controller picks the Machines to delete
	// from its watch cache when replicas drop: lowering before it can see
	// the marks could take a busy Machine instead. Wait until the marks
	// reach a watch (ours), else give the removal up for this pass.
	if err := g.awaitMarks(ctx, done); err != nil {
		g.unmark(ctx, done)
		return err
	}
	// Replicas are read again for the write: lowered from what they are
	// then, not from what they were when the Machines were chosen.
	if replicas, err = g.writeReplicas(ctx, bounded); err != nil {
		g.unmark(ctx, done)
		return err
	}
	if g.lowered == nil {
		g.lowered = map[types.UID]bool{}
	}
	for _, m := range victims {
		g.lowered[m.GetUID()] = true
	}
	g.p.logger.Info("Deleting nodes", "nodeGroup", g.id, "machines", slices.Sorted(maps.Keys(victims)), "from", replicas, "to", replicas-lower, "force", force)
	return nil
}

// mark sets (or clears) delete-machine on a Machine with a merge patch.
func (g *nodeGroup) mark(ctx context.Context, m *unstructured.Unstructured, on bool) error {
	var value any
	if on {
		value = g.p.clock.Now().UTC().Format(time.RFC3339)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{g.p.keys.deleteMachine: value}}})
	_, err := g.p.dyn.Resource(g.p.gvr[kindMachine]).Namespace(m.GetNamespace()).Patch(ctx, m.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("node group %s: annotating Machine %s/%s with %s: %w", g.id, m.GetNamespace(), m.GetName(), g.p.keys.deleteMachine, err)
	}
	return nil
}

// unmark takes the marks off again after a failed decrement, so that a
// later unrelated scale-down does not take these Machines.
func (g *nodeGroup) unmark(ctx context.Context, ms []*unstructured.Unstructured) {
	for _, m := range ms {
		if err := g.mark(context.WithoutCancel(ctx), m, false); err != nil {
			g.p.logger.Error(err, "Could not remove the delete mark after a failed scale-down", "nodeGroup", g.id)
		}
	}
}

// DecreaseTargetSize gives up -delta requested nodes that have not
// registered: first replicas not backed by any Machine yet, then the
// newest Machines without a Node, marked so that Cluster API deletes
// exactly those. It never removes a Machine that has a Node.
func (g *nodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if delta >= 0 {
		return fmt.Errorf("node group %s: size decrease must be negative, got %d", g.id, delta)
	}
	st, err := g.current()
	if err != nil {
		return err
	}
	if v, ok := st.obj.GetAnnotations()[cloudprovider.AnnotationUnitSize]; ok {
		if unit, err := strconv.Atoi(v); err == nil && unit > 1 && delta%unit != 0 {
			return fmt.Errorf("node group %s: size increase by %d refused: %s says it grows in whole units of %d", g.id, delta, cloudprovider.AnnotationUnitSize, unit)
		}
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	replicas, _, err := g.scaleReplicas(ctx)
	if err != nil {
		return err
	}
	var live, pending []*unstructured.Unstructured
	for _, m := range st.machines {
		if deleting(m) {
			continue
		}
		live = append(live, m)
		if _, marked := m.GetAnnotations()[g.p.keys.deleteMachine]; !hasNode(m) && !marked {
			pending = append(pending, m)
		}
	}
	unbacked := max(replicas-len(live), 0)
	need := -delta
	if need > unbacked+len(pending) {
		return fmt.Errorf("node group %s: cannot decrease the target by %d: only %d requested node(s) have not registered", g.id, need, unbacked+len(pending))
	}
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i].GetCreationTimestamp(), pending[j].GetCreationTimestamp()
		return b.Before(&a) || a.Equal(&b) && pending[i].GetName() > pending[j].GetName()
	})
	take := max(need-unbacked, 0)
	var done []*unstructured.Unstructured
	for _, m := range pending[:take] {
		if err := g.mark(ctx, m, true); err != nil {
			g.unmark(ctx, done)
			return err
		}
		done = append(done, m)
	}
	// Only replicas no Machine backs may go without a mark: if they
	// changed since the read, that is decided again.
	replicas, err = g.writeReplicas(ctx, func(now int) (int, error) {
		if now != replicas && max(now-len(live), 0) < need-take {
			return 0, fmt.Errorf("node group %s: replicas changed from %d to %d meanwhile; only %d requested node(s) are not backed by a Machine now", g.id, replicas, now, max(now-len(live), 0))
		}
		return now - need, nil
	})
	if err != nil {
		g.unmark(ctx, done)
		return err
	}
	g.p.logger.Info("Decreased target size", "nodeGroup", g.id, "from", replicas, "to", replicas-need, "machines", len(done))
	return nil
}

// Nodes lists the group's Machines (and a MachinePool's providerIDs that
// no Machine stands for, as Running).
func (g *nodeGroup) Nodes() ([]cloudprovider.Instance, error) {
	st, err := g.current()
	if err != nil {
		return nil, err
	}
	out := make([]cloudprovider.Instance, 0, len(st.machines)+len(st.poolIDs))
	seen := map[string]bool{}
	for _, m := range st.machines {
		in := instance(m)
		seen[normalizeProviderID(in.Id)] = true
		out = append(out, in)
	}
	for _, pid := range st.poolIDs {
		if !seen[normalizeProviderID(pid)] {
			out = append(out, cloudprovider.Instance{Id: pid, Status: &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}})
		}
	}
	return out, nil
}

// GetOptions reads upstream's autoscaling-options annotations;
// ErrNotImplemented when the group has none.
func (g *nodeGroup) GetOptions(defaults cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
	st, err := g.current()
	if err != nil {
		return nil, err
	}
	out, ok, bad := g.p.keys.options(st.obj.GetAnnotations(), defaults)
	for _, b := range bad {
		g.p.logger.Error(errors.New(b), "Ignoring a malformed autoscaling option", "nodeGroup", g.id)
	}
	if !ok {
		return nil, cloudprovider.ErrNotImplemented
	}
	return &out, nil
}

// CapacityReservation is the scalable resource's LabelCapacityReservation
// label, "" without one. A value that cannot be an object's name is
// still returned (the group then launches nowhere, and the autoscaler
// says it names no existing reservation) and told on the object.
func (g *nodeGroup) CapacityReservation() string {
	g.p.mu.Lock()
	st := g.state
	g.p.mu.Unlock()
	if st == nil {
		return ""
	}
	name := st.obj.GetLabels()[LabelCapacityReservation]
	if errs := validation.IsDNS1123Subdomain(name); name != "" && len(errs) > 0 {
		g.p.warn(st.obj, ReasonInvalidReservationLabel, fmt.Sprintf("Label %s=%q names no CapacityReservation: %s", LabelCapacityReservation, name, strings.Join(errs, "; ")))
	} else {
		g.p.forgetWarning(ReasonInvalidReservationLabel, st.obj)
	}
	return name
}

// markWait bounds awaitMarks.
const markWait = 10 * time.Second

// awaitMarks waits until the provider's Machine informer shows the
// delete-machine mark on each of ms.
func (g *nodeGroup) awaitMarks(ctx context.Context, ms []*unstructured.Unstructured) error {
	if g.p.machines == nil || len(ms) == 0 {
		return nil
	}
	deadline := time.Now().Add(markWait)
	for {
		missing := ""
		for _, m := range ms {
			obj, err := g.p.machines.ByNamespace(m.GetNamespace()).Get(m.GetName())
			u, ok := obj.(*unstructured.Unstructured)
			if err != nil || !ok {
				missing = m.GetName()
				break
			}
			if _, marked := u.GetAnnotations()[g.p.keys.deleteMachine]; !marked {
				missing = m.GetName()
				break
			}
		}
		if missing == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node group %s: the delete-machine mark on Machine %s was not seen within %s; replicas left as they are", g.id, missing, markWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
