// Package health decides whether the cluster is healthy enough to
// autoscale, by upstream's rule: when too many registered nodes are
// unready, something is wrong beyond what adding or removing nodes can
// fix (a network partition, a broken image), and acting on what the
// autoscaler sees would make it worse.
package health

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/drain"
)

// Options are the thresholds (--max-total-unready-percentage,
// --ok-total-unready-count) and the time a new node may take to become
// ready (--max-node-provision-time).
type Options struct {
	MaxUnreadyPercentage float64
	OkUnreadyCount       int
	StartupTime          time.Duration
}

// Assessment is the cluster's health in one pass.
type Assessment struct {
	Healthy bool
	// Unready and Total are the nodes counted.
	Unready, Total int
	// Reason says why the cluster is unhealthy; empty when healthy.
	Reason string
}

// Check counts the registered nodes whose Ready condition is not true,
// leaving out those still starting (created less than StartupTime ago:
// upstream's NotStarted) and those being deleted. The cluster is
// unhealthy when the unready nodes are more than OkUnreadyCount and also
// more than MaxUnreadyPercentage of all registered nodes.
func Check(nodes []*corev1.Node, now time.Time, o Options) Assessment {
	v := Assessment{Total: len(nodes)}
	for _, n := range nodes {
		if !nodeutil.IsNodeReady(n) && !starting(n, now, o.StartupTime) && !deleting(n) {
			v.Unready++
		}
	}
	limit := o.MaxUnreadyPercentage / 100 * float64(v.Total)
	if v.Unready <= o.OkUnreadyCount || float64(v.Unready) <= limit {
		v.Healthy = true
		return v
	}
	v.Reason = fmt.Sprintf("%d of %d nodes unready (%.0f%%), more than %v%% and more than %d",
		v.Unready, v.Total, 100*float64(v.Unready)/float64(v.Total), o.MaxUnreadyPercentage, o.OkUnreadyCount)
	return v
}

func starting(n *corev1.Node, now time.Time, startup time.Duration) bool {
	return now.Before(n.CreationTimestamp.Add(startup))
}

// deleting: on its way out, its readiness no longer matters (upstream
// counts these apart too).
func deleting(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == drain.ToBeDeletedTaint {
			return true
		}
	}
	return false
}
