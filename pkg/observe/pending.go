package observe

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/objorder"
)

// PendingSelection are the knobs of Pending.
type PendingSelection struct {
	// NewPodScaleUpDelay leaves pods younger than this to the scheduler.
	NewPodScaleUpDelay time.Duration
	// PriorityCutoff: pods with a lower priority never trigger a scale-up.
	PriorityCutoff int
	// SchedulerName is the profile the simulation runs; pods of other
	// schedulers are not ours to help.
	SchedulerName string
	// Nodes are the registered nodes: a pod nominated to one of them
	// waits for the scheduler's preemption there, not for a new node.
	Nodes map[string]bool
	// VolumeBindings are ClusterState's: a pod whose volume is being
	// provisioned for a registered node waits for the scheduler's binding.
	VolumeBindings map[string]string
	// Unheld are held pods (HeldNode) whose node cannot take them any
	// more, by UID (the snapshot found its devices taken): they are
	// pending like any other.
	Unheld map[types.UID]bool
}

// Registered is the set of the nodes' names, for NominatedNode and
// HeldNode.
func Registered(nodes []*corev1.Node) map[string]bool {
	m := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		m[n.Name] = true
	}
	return m
}

// annSelectedNode is set by the scheduler on a WaitForFirstConsumer claim
// once it picked a node; the provisioner creates the volume for it.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// HeldNode is the registered node the scheduler is already placing the
// pending pod on, or "": the node it nominated the pod for, or the node a
// claim of the pod is being provisioned for (the binding cycle waits for
// the volume). Such a pod needs no node of its own.
func HeldNode(p *corev1.Pod, nodes map[string]bool, volumeBindings map[string]string) string {
	if node := NominatedNode(p, nodes); node != "" {
		return node
	}
	if p.Spec.NodeName != "" {
		return ""
	}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		if node := volumeBindings[p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName]; nodes[node] {
			return node
		}
	}
	return ""
}

// NominatedNode is the registered node the scheduler nominated the pod for
// (it preempts lower-priority pods there to make room), or "". Such a pod
// needs no scale-up and holds its place on that node, as upstream's
// autoscaler treats it; a nomination to a node that is gone counts for
// nothing.
func NominatedNode(p *corev1.Pod, nodes map[string]bool) string {
	if p.Spec.NodeName == "" && p.Status.NominatedNodeName != "" && nodes[p.Status.NominatedNodeName] {
		return p.Status.NominatedNodeName
	}
	return ""
}

// IsExpendable: a pod below the priority cutoff, which the scheduler may
// preempt for any pod above it. Such pods never trigger a scale-up and
// never keep another pod from fitting.
func IsExpendable(p *corev1.Pod, cutoff int) bool {
	return p.Spec.Priority != nil && int(*p.Spec.Priority) < cutoff
}

// Skip says why the loop does not scale for p, "" when it does: the
// scheduler has not given up on it, it is expendable, the scheduler is
// already placing it, it is too young, or another scheduler's.
func (sel PendingSelection) Skip(p *corev1.Pod, now time.Time) string {
	switch {
	case IsExpendable(p, sel.PriorityCutoff):
		return fmt.Sprintf("its priority %d is below --expendable-pods-priority-cutoff=%d (it may be preempted, and never triggers a scale-up)",
			*p.Spec.Priority, sel.PriorityCutoff)
	case !IsUnschedulable(p):
		return "the scheduler has not found it unschedulable yet"
	case HeldNode(p, sel.Nodes, sel.VolumeBindings) != "" && !sel.Unheld[p.UID]:
		return "the scheduler is placing it on a node already"
	case now.Sub(p.CreationTimestamp.Time) < sel.NewPodScaleUpDelay:
		return "it is younger than --new-pod-scale-up-delay"
	}
	name := p.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	if sel.SchedulerName != "" && name != sel.SchedulerName {
		return fmt.Sprintf("it is scheduler %s's, and the simulation runs %s's profile", name, sel.SchedulerName)
	}
	return ""
}

// Pending returns the unschedulable pods a scale-up may help, highest
// priority first, then oldest, then by name.
func Pending(pods []*corev1.Pod, sel PendingSelection, now time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if sel.Skip(p, now) == "" {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int {
		if c := cmp.Compare(priority(b), priority(a)); c != 0 {
			return c
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return objorder.Compare(a.Namespace, a.Name, b.Namespace, b.Name)
	})
	return out
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority == nil {
		return 0
	}
	return *p.Spec.Priority
}
