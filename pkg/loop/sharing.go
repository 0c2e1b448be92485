package loop

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stages/stranded"
)

// sharing measures stranded DRA capacity on the freshly built snapshot
// and applies the prioritized-list policy to the pods about to be
// fitted, which it returns (see placement.PreferFirstAlternative).
func (l *Loop) sharing(ctx context.Context, state *observe.ClusterState, groups []*nodegroups.Info, built *snapshot.Result, pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	if l.Stranded != nil && built != nil {
		start := time.Now()
		l.Stranded.Run(ctx, stranded.Input{Snapshot: l.Runner.Snapshot(), Pods: state.Pods, Nodes: built.Nodes,
			GroupOf: groupOf(groups), DeviceClasses: state.DeviceClasses}, now)
		l.Metrics.Observe("strandedCapacity", start)
	}
	var templates []*cloudprovider.NodeTemplate
	for _, g := range groups {
		if g.Template != nil {
			templates = append(templates, g.Template)
		}
	}
	return l.Placement.PreferFirstAlternative(ctx, pods, templates)
}

// groupOf maps the registered nodes to their groups.
func groupOf(groups []*nodegroups.Info) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		for _, n := range g.Ready {
			out[n.Name] = g.Id
		}
		for _, n := range g.Booting {
			out[n.Name] = g.Id
		}
	}
	return out
}
