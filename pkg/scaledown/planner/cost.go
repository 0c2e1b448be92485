package planner

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Annotations on pods that say what evicting them costs; between nodes
// otherwise equal, the one whose pods cost less in total goes first.
const (
	// DisruptionCostAnnotation is the annotation proposed for every node
	// autoscaler (kubernetes/autoscaler proposal #9850). It wins over
	// PodDeletionCostAnnotation when both are set.
	DisruptionCostAnnotation = "node-autoscaling.kubernetes.io/disruption-cost"
	// PodDeletionCostAnnotation is the ReplicaSet controller's: the cost
	// of deleting the pod when scaling the ReplicaSet down.
	PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"
)

// disruptionCost adds up the costs of the pods; a pod that sets neither
// annotation costs 0. A value that is not a 32-bit integer is ignored
// (the other annotation, or 0, counts) and returned as a warning.
func disruptionCost(pods []*corev1.Pod) (int64, []Warning) {
	var total int64
	var warnings []Warning
	for _, p := range pods {
		cost, bad := podCost(p)
		total += cost
		for _, key := range bad {
			warnings = append(warnings, Warning{Object: p, Reason: "InvalidAnnotation",
				Message: fmt.Sprintf("pod %s/%s: %s=%q is not a 32-bit integer; ignored", p.Namespace, p.Name, key, p.Annotations[key])})
		}
	}
	return total, warnings
}

// podCost is the pod's cost and the annotations found malformed.
func podCost(p *corev1.Pod) (int64, []string) {
	var bad []string
	for _, key := range []string{DisruptionCostAnnotation, PodDeletionCostAnnotation} {
		v, ok := p.Annotations[key]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			bad = append(bad, key)
			continue
		}
		return n, bad
	}
	return 0, bad
}
