package nodegroups

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
)

// startupTaintPrefix marks taints a node carries until its own start-up
// is done (upstream's convention); such a node is not usable yet.
const startupTaintPrefix = "startup-taint.cluster-autoscaler.kubernetes.io/"

// startupTaints are lifted by controllers once the node works; until then
// the scheduler will not use it.
var startupTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	corev1.TaintNodeNetworkUnavailable:               true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
}

// Usable tells whether a registered node can take pods as its group's
// template says: its Ready condition is true, no start-up taint is left
// and every DRA driver the template has published complete pools (every
// pool's resourceSliceCount reached at its newest generation). When it
// cannot, why says what is missing, for events and the status.
//
// A node whose drivers have not published everything is still booting for
// DRA purposes: counting it as usable would make pods that need its
// devices look unplaceable and scale up twice, and using it as the
// template would hide devices the group really has.
func Usable(node *corev1.Node, expected, slices []*resourceapi.ResourceSlice) (ok bool, why string) {
	ok, why, _ = usable(node, expected, slices)
	return ok, why
}

// usable is Usable, and when only the DRA pools are short, which pool.
func usable(node *corev1.Node, expected, slices []*resourceapi.ResourceSlice) (ok bool, why string, short *shortPool) {
	if !nodeutil.IsNodeReady(node) {
		return false, "node is not Ready", nil
	}
	for _, t := range node.Spec.Taints {
		if startupTaints[t.Key] || strings.HasPrefix(t.Key, startupTaintPrefix) {
			return false, fmt.Sprintf("node still has the start-up taint %s", t.Key), nil
		}
	}
	if short := missingPools(expected, slices); short != nil {
		return false, short.why, short
	}
	return true, "", nil
}

// shortPool is a driver whose pools on a node are incomplete: pool names
// the first incomplete one ("" when the driver published none).
type shortPool struct {
	driver, pool, why string
}

// missingPools names, for the first driver of expected (sorted) that is
// short, what it lacks; nil when every driver published complete pools.
func missingPools(expected, slices []*resourceapi.ResourceSlice) *shortPool {
	drivers := map[string]bool{}
	for _, s := range expected {
		drivers[s.Spec.Driver] = true
	}
	names := make([]string, 0, len(drivers))
	for d := range drivers {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, driver := range names {
		if short := poolsOf(driver, slices); short != nil {
			return short
		}
	}
	return nil
}

// poolsOf checks the pools one driver published for a node.
func poolsOf(driver string, slices []*resourceapi.ResourceSlice) *shortPool {
	type pool struct {
		generation int64
		want, have int64
	}
	pools := map[string]*pool{}
	for _, s := range slices {
		if s.Spec.Driver != driver {
			continue
		}
		p := pools[s.Spec.Pool.Name]
		switch {
		case p == nil || s.Spec.Pool.Generation > p.generation:
			pools[s.Spec.Pool.Name] = &pool{generation: s.Spec.Pool.Generation, want: s.Spec.Pool.ResourceSliceCount, have: 1}
		case s.Spec.Pool.Generation == p.generation:
			p.have++
		}
	}
	if len(pools) == 0 {
		return &shortPool{driver: driver, why: fmt.Sprintf("driver %s: no ResourceSlice published", driver)}
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if p := pools[n]; p.have < p.want {
			return &shortPool{driver: driver, pool: n, why: fmt.Sprintf("driver %s: pool %s has %d of %d slices", driver, n, p.have, p.want)}
		}
	}
	return nil
}

// lastPoolChange is when anything the node's drivers publish last
// changed, as the API server stamped it (so a restarted process reads the
// same): the newest creation or write of the node's slices of driver, or
// when the node last turned Ready if that is later (a driver starts
// publishing once its node runs).
func lastPoolChange(node *corev1.Node, driver string, slices []*resourceapi.ResourceSlice) time.Time {
	last := node.CreationTimestamp.Time
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.LastTransitionTime.After(last) {
			last = c.LastTransitionTime.Time
		}
	}
	for _, s := range slices {
		if s.Spec.Driver != driver {
			continue
		}
		if s.CreationTimestamp.After(last) {
			last = s.CreationTimestamp.Time
		}
		for _, f := range s.ManagedFields {
			if f.Time != nil && f.Time.After(last) {
				last = f.Time.Time
			}
		}
	}
	return last
}
