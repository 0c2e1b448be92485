package loop

import (
	"context"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
)

// capacityBuffers plans the buffers' pods after the real pending pods:
// those placed, gangs, loose pods and their new nodes are in the snapshot
// already, so buffer pods get only what is left and never keep a real pod
// from a node. Placed buffer pods stay in the snapshot for scale-down,
// which must find them room before removing a node.
func (l *Loop) capacityBuffers(ctx context.Context, p *Pass) error {
	start := time.Now()
	usage := p.usage
	if p.Plan != nil {
		for _, up := range p.Plan.ScaleUps {
			usage.Add(up.Group.Template.Node, up.Delta)
		}
	}
	out, err := l.Buffers.Run(ctx, buffers.Input{Runner: l.Runner, Candidates: p.built.Candidates(), Planner: p.planner,
		Groups: p.Groups, Usage: usage, ClassOf: l.ClassOf, ClaimTemplates: p.cluster.ResourceClaimTemplates, Now: p.StartedAt})
	l.Metrics.Observe("capacityBuffers", start)
	if err != nil {
		return failed("simulationError", err)
	}
	p.Buffers = out
	p.ups = append(p.ups, out.ScaleUps...)
	return nil
}

// capacityBufferStatus writes the buffers' status after the scale-ups
// were made (or failed).
func (l *Loop) capacityBufferStatus(ctx context.Context, p *Pass) error {
	l.Buffers.Write(ctx, p.Buffers, p.Results, p.Unsafe)
	return nil
}
