// Package limits caps scale-ups by the cluster-wide totals: number of
// nodes, cores and memory, counting registered nodes and nodes still being
// provisioned, so no scale-up can overshoot while earlier ones boot.
package limits

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

const gib = 1 << 30

// Reasons name the limit that stopped a scale-up, as events and the status
// report them.
const (
	ReasonMaxNodesTotal = "max-nodes-total"
	ReasonCoresTotal    = "cores-total"
	ReasonMemoryTotal   = "memory-total"
	ReasonGroupMax      = "node-group-max-size"
)

// Usage is what the cluster has or has asked for.
type Usage struct {
	Nodes     int
	MilliCPU  int64
	MemoryGiB float64
	// Planned are the new nodes this pass planned so far, by node group
	// id: a group's room is its max size less its size and these, so
	// plans made one after another in a pass (requests, gangs, pods,
	// buffers) never ask a group for more than it can take. Copied on
	// write: a Usage passed by value (a plan tried and dropped) never
	// changes its caller's.
	Planned map[string]int
}

// Add counts n nodes like node.
func (u *Usage) Add(node *corev1.Node, n int) {
	alloc := node.Status.Capacity
	if len(alloc) == 0 {
		alloc = node.Status.Allocatable
	}
	u.Nodes += n
	u.MilliCPU += alloc.Cpu().MilliValue() * int64(n)
	u.MemoryGiB += float64(alloc.Memory().Value()) / gib * float64(n)
}

// AddPlanned is Add for n new nodes of the node group named group.
func (u *Usage) AddPlanned(group string, node *corev1.Node, n int) {
	u.Add(node, n)
	planned := make(map[string]int, len(u.Planned)+1)
	for g, k := range u.Planned {
		planned[g] = k
	}
	planned[group] += n
	u.Planned = planned
}

// Limiter holds the limits of the flags, tightened by the provider's.
type Limiter struct {
	maxNodes  int // 0: none
	maxCores  int64
	maxMemGiB int64
}

// New combines the flags with the provider's limiter (which may be nil).
func New(o *config.Options, provider *cloudprovider.ResourceLimiter) *Limiter {
	l := &Limiter{maxNodes: o.MaxNodesTotal, maxCores: o.CoresTotal.Max, maxMemGiB: o.MemoryTotal.Max}
	if v, ok := provider.Max(cloudprovider.ResourceNameCores); ok && v < l.maxCores {
		l.maxCores = v
	}
	if v, ok := provider.Max(cloudprovider.ResourceNameMemory); ok && v < l.maxMemGiB {
		l.maxMemGiB = v
	}
	return l
}

// MaxNewNodes is how many nodes like node fit under the totals, and the
// limit that binds ("" when none does before want).
func (l *Limiter) MaxNewNodes(u Usage, node *corev1.Node, want int) (int, string) {
	n, reason := want, ""
	tighten := func(room int, r string) {
		if room < n {
			n, reason = max(room, 0), r
		}
	}
	if l.maxNodes > 0 {
		tighten(l.maxNodes-u.Nodes, ReasonMaxNodesTotal)
	}
	var one Usage
	one.Add(node, 1)
	if one.MilliCPU > 0 {
		tighten(int((l.maxCores*1000-u.MilliCPU)/one.MilliCPU), ReasonCoresTotal)
	}
	if one.MemoryGiB > 0 {
		tighten(int(math.Floor((float64(l.maxMemGiB)-u.MemoryGiB)/one.MemoryGiB)), ReasonMemoryTotal)
	}
	return n, reason
}

func (l *Limiter) String() string {
	return fmt.Sprintf("max-nodes-total=%d cores<=%d memory<=%dGiB", l.maxNodes, l.maxCores, l.maxMemGiB)
}
