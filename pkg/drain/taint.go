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

// Taint puts the deletion taint (NoSchedule) on the node, re-reading it on
// conflicts. It returns the node as updated.
func Taint(ctx context.Context, client kubernetes.Interface, name string, now time.Time) (*corev1.Node, error) {
	return updateNode(ctx, client, name, func(n *corev1.Node) bool {
		for _, t := range n.Spec.Taints {
			if t.Key == ToBeDeletedTaint {
				return false
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: ToBeDeletedTaint, Value: strconv.FormatInt(now.Unix(), 10), Effect: corev1.TaintEffectNoSchedule})
		return true
	})
}

// Untaint removes the deletion taint. A node that is gone is not an error.
func Untaint(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := updateNode(ctx, client, name, func(n *corev1.Node) bool {
		kept := n.Spec.Taints[:0:0]
		for _, t := range n.Spec.Taints {
			if t.Key != ToBeDeletedTaint {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(n.Spec.Taints) {
			return false
		}
		n.Spec.Taints = kept
		return true
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
