// Package drain takes a node out of service the way the upstream cluster
// autoscaler does: the ToBeDeletedByClusterAutoscaler taint first (the
// scheduler stops placing pods there), then every pod that must move is
// evicted through the Eviction API, so PodDisruptionBudgets are honoured
// by the API server itself, and the drain waits until the pods are gone.
// A drain that fails takes the taint off again.
package drain

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// ToBeDeletedTaint is the taint key (upstream's, so tools that know it
// keep working); its value is the Unix time it was set.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// CordonedAnnotation marks a node the autoscaler cordoned along with its
// deletion taint (--cordon-node-before-terminating), so that undoing the
// mark uncordons only nodes it cordoned, never one an admin did.
const CordonedAnnotation = "autoscaling.dra-autoscaler.io/cordoned-for-deletion"

// Taint puts the deletion taint (NoSchedule) on the node, re-reading it on
// conflicts. It returns the node as updated.
func Taint(ctx context.Context, client kubernetes.Interface, name string, now time.Time) (*corev1.Node, error) {
	return Mark(ctx, client, name, now, false)
}

// Mark puts the deletion taint on the node and, with cordon, marks it
// unschedulable too (for tools that watch spec.unschedulable rather than
// taints), in one update.
func Mark(ctx context.Context, client kubernetes.Interface, name string, now time.Time, cordon bool) (*corev1.Node, error) {
	return updateNode(ctx, client, name, func(n *corev1.Node) bool {
		changed := false
		if !hasTaint(n) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ToBeDeletedTaint, Value: strconv.FormatInt(now.Unix(), 10), Effect: corev1.TaintEffectNoSchedule})
			changed = true
		}
		if cordon && !n.Spec.Unschedulable {
			n.Spec.Unschedulable = true
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[CordonedAnnotation] = "true"
			changed = true
		}
		return changed
	})
}

func hasTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return true
		}
	}
	return false
}

// Untaint removes the deletion taint, and uncordons the node when Mark
// cordoned it. A node that is gone is not an error.
func Untaint(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := updateNode(ctx, client, name, func(n *corev1.Node) bool {
		kept := n.Spec.Taints[:0:0]
		for _, t := range n.Spec.Taints {
			if t.Key != ToBeDeletedTaint {
				kept = append(kept, t)
			}
		}
		changed := len(kept) != len(n.Spec.Taints)
		n.Spec.Taints = kept
		if _, ok := n.Annotations[CordonedAnnotation]; ok {
			n.Spec.Unschedulable = false
			delete(n.Annotations, CordonedAnnotation)
			changed = true
		}
		return changed
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// updateNode applies change to a fresh copy of the node and updates it
// when change reports a difference, retrying on conflicts.
func updateNode(ctx context.Context, client kubernetes.Interface, name string, change func(*corev1.Node) bool) (*corev1.Node, error) {
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !change(node) {
			out = node
			return nil
		}
		out, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return out, nil
}
