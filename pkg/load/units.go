package load

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// upcomingTemplates are the templates of a group's n upcoming nodes, in
// order. For a group whose nodes come in units (issue 41) with labels its
// provider picks per unit, an upcoming node carries its unit's values:
// first the units registered in part (their nodes still to come are the
// upcoming ones; the values are known), then one placeholder per unit yet
// to register, which no node has ("booting unit k of <group>"): a booting
// unit is one candidate domain, whose free room a pod or gang that needs
// one domain may take before the unit registers. Other groups: their
// template for every node.
func upcomingTemplates(g *nodegroups.Info, n int) []*cloudprovider.NodeTemplate {
	out := make([]*cloudprovider.NodeTemplate, n)
	size, _ := g.Template.UnitSize()
	labels := g.Template.PerRequestLabels()
	if size <= 1 || len(labels) == 0 {
		for i := range out {
			out[i] = g.Template
		}
		return out
	}
	// Registered nodes per unit, and each unit's values.
	count := map[string]int{}
	values := map[string]map[string]string{}
	for _, node := range slices.Concat(g.Ready, g.Booting) {
		k := g.Template.UnitOf(node)
		count[k]++
		if values[k] == nil {
			values[k] = map[string]string{}
			for _, l := range labels {
				values[k][l] = node.Labels[l]
			}
		}
	}
	i := 0
	with := func(v map[string]string, nodes int) {
		t := g.Template.DeepCopy()
		maps.Copy(t.Node.Labels, v)
		for ; nodes > 0 && i < n; nodes-- {
			out[i] = t
			i++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(count)) {
		if count[k] < size {
			with(values[k], size-count[k])
		}
	}
	for unit := 0; i < n; unit++ {
		v := map[string]string{}
		for _, l := range labels {
			v[l] = fmt.Sprintf("booting unit %d of %s", unit, g.Id)
		}
		with(v, size)
	}
	return out
}
