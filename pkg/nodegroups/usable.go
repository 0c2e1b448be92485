package nodegroups

import (
	"fmt"
	"sort"
	"strings"

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
	if !nodeutil.IsNodeReady(node) {
		return false, "node is not Ready"
	}
	for _, t := range node.Spec.Taints {
		if startupTaints[t.Key] || strings.HasPrefix(t.Key, startupTaintPrefix) {
			return false, fmt.Sprintf("node still has the start-up taint %s", t.Key)
		}
	}
	if missing := missingPools(expected, slices); missing != "" {
		return false, missing
	}
	return true, ""
}

// missingPools names, for the first driver of expected (sorted) that is
// short, what it lacks; "" when every driver published complete pools.
func missingPools(expected, slices []*resourceapi.ResourceSlice) string {
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
		if why := poolsOf(driver, slices); why != "" {
			return why
		}
	}
	return ""
}

// poolsOf checks the pools one driver published for a node.
func poolsOf(driver string, slices []*resourceapi.ResourceSlice) string {
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
		return fmt.Sprintf("driver %s: no ResourceSlice published", driver)
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if p := pools[n]; p.have < p.want {
			return fmt.Sprintf("driver %s: pool %s has %d of %d slices", driver, n, p.have, p.want)
		}
	}
	return ""
}
