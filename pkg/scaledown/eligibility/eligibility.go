// Package eligibility is the first, cheap filter of scale-down: which
// nodes may be considered at all, before any pod is looked at. A node is
// eligible when nobody forbade it, it is not already on its way out, it is
// ready or unready nodes may go, and its utilization is under the
// threshold of its kind.
package eligibility

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/utilization"
)

// ScaleDownDisabledAnnotation "true" on a node keeps it (upstream's name).
const ScaleDownDisabledAnnotation = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// ToBeDeletedTaint marks a node the autoscaler is removing; the drain
// owns it.
const ToBeDeletedTaint = drain.ToBeDeletedTaint

// Reasons a node is not eligible (upstream's names where they exist).
const (
	ScaleDownDisabled        = "ScaleDownDisabledAnnotation"
	CurrentlyBeingDeleted    = "CurrentlyBeingDeleted"
	ScaleDownUnreadyDisabled = "ScaleDownUnreadyDisabled"
	NotUnderutilized         = "NotUnderutilized"
)

// Thresholds are the utilization thresholds: a node at or above its
// threshold is not underutilized.
type Thresholds struct {
	// Utilization is for nodes without devices
	// (--scale-down-utilization-threshold).
	Utilization float64
	// GPU is for nodes with DRA devices
	// (--scale-down-gpu-utilization-threshold).
	GPU float64
}

// NodeVerdict on one node. Warning reports bad input to tell the node's owner.
type NodeVerdict struct {
	Eligible bool
	Reason   string
	Detail   string
	Warning  string
}

// Check decides whether a node may be considered, from the node and its
// utilization. An unready node is considered only when unreadyEnabled
// (--scale-down-unready-enabled).
func Check(node *corev1.Node, util utilization.NodeUtilization, t Thresholds, unreadyEnabled bool) NodeVerdict {
	if disabled, warning := scaleDownDisabled(node); disabled {
		return NodeVerdict{Reason: ScaleDownDisabled, Detail: fmt.Sprintf("%s=%q", ScaleDownDisabledAnnotation, node.Annotations[ScaleDownDisabledAnnotation]), Warning: warning}
	}
	if node.DeletionTimestamp != nil || HasToBeDeletedTaint(node) {
		return NodeVerdict{Reason: CurrentlyBeingDeleted}
	}
	if !unreadyEnabled && !IsReady(node) {
		return NodeVerdict{Reason: ScaleDownUnreadyDisabled}
	}
	threshold, kind := t.Utilization, "utilization"
	if util.HasDevices {
		threshold, kind = t.GPU, "gpu utilization"
	}
	if util.Utilization >= threshold {
		return NodeVerdict{Reason: NotUnderutilized, Detail: fmt.Sprintf("utilization %s is not under the %s threshold %.2f", util, kind, threshold)}
	}
	return NodeVerdict{Eligible: true}
}

// scaleDownDisabled reads the annotation. A value that is not a boolean
// keeps the node, with a warning: whoever wrote it wanted something, and
// keeping a node is the cheaper mistake.
func scaleDownDisabled(node *corev1.Node) (bool, string) {
	v, ok := node.Annotations[ScaleDownDisabledAnnotation]
	if !ok {
		return false, ""
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return true, fmt.Sprintf("annotation %s=%q is not true or false; the node is kept as if it said true", ScaleDownDisabledAnnotation, v)
	}
	return b, ""
}

// IsReady tells whether the node's Ready condition is true. An unready
// node that is unneeded waits --scale-down-unready-time, not
// --scale-down-unneeded-time, before removal.
func IsReady(node *corev1.Node) bool { return nodeutil.IsNodeReady(node) }

// HasToBeDeletedTaint tells whether the autoscaler's deletion taint is on.
func HasToBeDeletedTaint(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return true
		}
	}
	return false
}
