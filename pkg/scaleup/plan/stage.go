package plan

import (
	"context"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Keys the planning stages write: what was planned for each gang, and the
// plan for the pods planned alone.
var (
	Gangs  = pass.NewKey[[]GangOutcome]("gangPlans")
	Result = pass.NewKey[*Plan]("plan")
)

// Stage names.
const (
	GangsStageName = "gangs"
	StageName      = "plan"
)

// ForCount is the planner for one pass: reservation-aware with the pass's
// count, when there is one.
func (p *Planner) ForCount(c *reservations.Count) *Planner {
	if c == nil {
		return p
	}
	return p.WithCapacity(c)
}

// GangsStage plans each gang whole or not at all; what it gets is taken
// before single pods are fitted.
func (p *Planner) GangsStage(runner *framework.Runner) pass.Stage {
	return pass.Func{ID: GangsStageName,
		In:  pass.Keys(pending.Gangs, load.Built, nodegroups.Groups, pending.Usage, reservations.Counted),
		Out: pass.Keys(Gangs, pending.Usage, act.Planned),
		Do: func(ctx context.Context, st *pass.State) error {
			outcomes, usage, err := p.ForCount(pass.Get(st, reservations.Counted)).PlanGangs(ctx, runner, pass.Get(st, pending.Gangs),
				pass.Get(st, load.Built).Candidates(), pass.Get(st, nodegroups.Groups), pass.Get(st, pending.Usage), st.Started)
			pass.Put(st, pending.Usage, usage)
			if err != nil {
				return pass.Failed("simulationError", err)
			}
			pass.Put(st, Gangs, outcomes)
			for _, o := range outcomes {
				pass.Update(st, act.Planned, func(ups []act.ScaleUp) []act.ScaleUp { return append(ups, o.ScaleUps...) })
			}
			return nil
		}}
}

// Stage plans the scale-ups for the pods that fit nothing existing or
// coming. observe (nil: not timed) times it as "scaleUp".
func (p *Planner) Stage(observe func(function string, start time.Time)) pass.Stage {
	return pass.Func{ID: StageName,
		In:  pass.Keys(fitexisting.Pending, nodegroups.Groups, pending.Usage, reservations.Counted),
		Out: pass.Keys(Result, act.Planned),
		Do: func(ctx context.Context, st *pass.State) error {
			pods := pass.Get(st, fitexisting.Pending)
			if len(pods) == 0 {
				return nil
			}
			start := time.Now()
			plan, err := p.ForCount(pass.Get(st, reservations.Counted)).Plan(ctx, pods, pass.Get(st, nodegroups.Groups), pass.Get(st, pending.Usage), st.Started)
			if observe != nil {
				observe("scaleUp", start)
			}
			if err != nil {
				return pass.Failed("simulationError", err)
			}
			pass.Put(st, Result, plan)
			pass.Update(st, act.Planned, func(ups []act.ScaleUp) []act.ScaleUp { return append(ups, plan.ScaleUps...) })
			return nil
		}}
}
