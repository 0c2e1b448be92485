package buffers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Served is the key of what a pass did for the buffers.
var Served = pass.NewKey[*PassOutcome]("capacityBuffers")

// Stage names.
const (
	StageName       = "capacityBuffers"
	StatusStageName = "capacityBufferStatus"
)

// StageParts are what the buffers' planning stage works with.
type StageParts struct {
	Runner  *framework.Runner
	Planner *plan.Planner
	ClassOf func(*corev1.Pod) string
	// Observe times the stage ("capacityBuffers"); nil: not timed.
	Observe func(function string, start time.Time)
}

// Stage plans the buffers' pods after the real pending pods: those
// placed, gangs, loose pods and their new nodes are in the snapshot
// already, so buffer pods get only what is left and never keep a real pod
// from a node. Placed buffer pods stay in the snapshot for scale-down,
// which must find them room before removing a node.
func (p *Manager) Stage(parts StageParts) pass.Stage {
	return pass.Func{ID: StageName,
		In:  pass.Keys(load.Built, nodegroups.Groups, pending.Usage, plan.Result, reservations.Counted, observe.Cluster),
		Out: pass.Keys(Served, act.Planned),
		Do: func(ctx context.Context, st *pass.State) error {
			start := time.Now()
			usage := pass.Get(st, pending.Usage)
			if pl := pass.Get(st, plan.Result); pl != nil {
				for _, up := range pl.ScaleUps {
					usage.AddPlanned(up.Group.Id, up.Group.Template.Node, up.Delta)
				}
			}
			built := pass.Get(st, load.Built)
			cluster := pass.Get(st, observe.Cluster)
			notYet := make(map[string]bool, len(built.GroupOf))
			for n := range built.GroupOf {
				notYet[n] = true // upcoming or booting
			}
			out, err := p.Run(ctx, RunInput{Runner: parts.Runner, Candidates: built.Candidates(), NotYet: notYet,
				Planner: parts.Planner.ForCount(pass.Get(st, reservations.Counted)), Groups: pass.Get(st, nodegroups.Groups),
				Usage: usage, ClassOf: parts.ClassOf, ClaimTemplates: cluster.ResourceClaimTemplates, Pods: cluster.Pods, Now: st.Started})
			if parts.Observe != nil {
				parts.Observe("capacityBuffers", start)
			}
			if err != nil {
				return pass.Failed("simulationError", err)
			}
			pass.Put(st, Served, out)
			pass.Update(st, act.Planned, func(ups []act.ScaleUp) []act.ScaleUp { return append(ups, out.ScaleUps...) })
			return nil
		}}
}

// StatusStage writes the buffers' status after the scale-ups were made
// (or failed).
func (p *Manager) StatusStage() pass.Stage {
	return pass.Func{ID: StatusStageName, Acting: true, In: pass.Keys(Served, act.Results, observe.Unsafe),
		Do: func(ctx context.Context, st *pass.State) error {
			p.Write(ctx, pass.Get(st, Served), pass.Get(st, act.Results), pass.Get(st, observe.Unsafe))
			return nil
		}}
}
