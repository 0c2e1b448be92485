package drainability

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
)

// Remaining lists the node's pods afresh from the API server and returns
// those that would not go with the node (namespace/name): work a removal
// would destroy. Used right before a node is deleted, after it was
// tainted, so a pod bound after a plan was made is seen. The node is read
// afresh too: on a node that is not Ready, pods being deleted are work
// (CheckOn).
func Remaining(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	ready := true
	switch n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("get node %s: %w", node, err)
	default:
		ready = nodeutil.IsNodeReady(n)
	}
	pods, err := podsOf(ctx, client, node)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if !GoesWithNode(p) || !ready && TerminatingUnconfirmed(p) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out, nil
}

// DaemonSetPods lists the node's running DaemonSet pods afresh.
func DaemonSetPods(ctx context.Context, client kubernetes.Interface, node string) ([]*corev1.Pod, error) {
	pods, err := podsOf(ctx, client, node)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if isDaemonSetPod(p) && !isTerminal(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func podsOf(ctx context.Context, client kubernetes.Interface, node string) ([]*corev1.Pod, error) {
	list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of node %s: %w", node, err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		// Checked again: not every client honours field selectors.
		if p := &list.Items[i]; p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}
