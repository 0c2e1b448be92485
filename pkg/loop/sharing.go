package loop

import (
	"context"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/stranded"
)

// sharing measures stranded DRA capacity on the freshly built snapshot
// and applies the prioritized-list policy to the single pods about to be
// fitted (see placement.PreferFirstAlternative).
func (l *Loop) sharing(ctx context.Context, p *Pass) error {
	if l.Stranded != nil {
		start := time.Now()
		l.Stranded.Run(ctx, stranded.MeterInput{Snapshot: l.Runner.Snapshot(), Pods: p.cluster.Pods, Nodes: p.built.Nodes,
			GroupOf: groupOf(p.Groups), DeviceClasses: p.cluster.DeviceClasses}, p.StartedAt)
		l.Metrics.Observe("strandedCapacity", start)
	}
	var templates []*cloudprovider.NodeTemplate
	for _, g := range p.Groups {
		if g.Template != nil {
			templates = append(templates, g.Template)
		}
	}
	p.loose = l.Placement.PreferFirstAlternative(ctx, p.loose, templates)
	return nil
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
