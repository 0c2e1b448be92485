package drainability

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Remaining lists the node's pods afresh from the API server and returns
// those that would not go with the node (namespace/name): work a removal
// would destroy. Used right before a node is deleted, after it was
// tainted, so a pod bound after a plan was made is seen.
func Remaining(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("list pods of node %s: %w", node, err)
	}
	var out []string
	for i := range pods.Items {
		// Checked again: not every client honours field selectors.
		if p := &pods.Items[i]; p.Spec.NodeName == node && !GoesWithNode(p) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out, nil
}
