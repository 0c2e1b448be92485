package plan

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// WithoutCarry is the planner re-estimating every group every round.
func (p *Planner) WithoutCarry() *Planner {
	cp := *p
	cp.noCarry = true
	return &cp
}

// PlanCounting is Plan, also saying how many group estimates it ran and
// how many it carried from the round before.
func (p *Planner) PlanCounting(ctx context.Context, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage, now time.Time) (*Plan, int, int, error) {
	out, c, err := p.plan(ctx, pods, groups, usage, now)
	if err != nil {
		return nil, 0, 0, err
	}
	return out, c.estimated, c.carried, nil
}

// KeepCalls is Plan, also saying how many framework calls its keeps made.
func (p *Planner) KeepCalls(ctx context.Context, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage, now time.Time) (*Plan, int, error) {
	out, c, err := p.plan(ctx, pods, groups, usage, now)
	if err != nil {
		return nil, 0, err
	}
	return out, c.keepCalls, nil
}

// TriesOf is what explain lists of a pod group cycle's placements.
var TriesOf = triesOf

// CheckNarrowed is checkNarrowed: verify mode's check that no placement
// holds a node the gang's first run placed nowhere.
var CheckNarrowed = checkNarrowed

// GangsReplayed is how many gangs the planner planned as an alike gang
// before them, and with that gang's options.
func (p *Planner) GangsReplayed() (replayed, options int) { return p.replayed, p.reusedOptions }
