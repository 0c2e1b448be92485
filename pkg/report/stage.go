package report

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
)

// StageName is the report stage's name.
const StageName = "report"

// Stage tells pods, PodGroups, nodes and the metrics what the pass
// decided and what came of it: scale-ups made, failed and given up, pods
// no group helps, gangs, stalled DRA pools, backed-off groups.
func (r *Reporter) Stage(b *backoff.Backoff, poolStall time.Duration) pass.Stage {
	return pass.Func{ID: StageName, Acting: true,
		In: pass.Keys(observe.Cluster, nodegroups.Groups, track.Failures, track.Errors, plan.Result, plan.Gangs,
			pending.Waiting, act.Results),
		Do: func(_ context.Context, st *pass.State) error {
			state, groups, now := pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups), st.Started
			r.Instances(pass.Get(st, track.Failures), pass.Get(st, track.Errors))
			if results := pass.Get(st, act.Results); len(results) > 0 {
				r.ScaleUps(results, now)
			}
			if p := pass.Get(st, plan.Result); p != nil {
				r.NotHelped(p.NotHelped, p.Reasons, now)
			}
			r.Gangs(GangReports(pass.Get(st, plan.Gangs), pass.Get(st, pending.Waiting), state), now)
			r.Groups(groups, state.Nodes)
			r.StalledPools(groups, state.Nodes, poolStall, now)
			r.metrics.NodeGroupBackedOff.Reset()
			for _, g := range groups {
				if s, off := b.Get(g.Id, now); off {
					r.metrics.NodeGroupBackedOff.WithLabelValues(g.Id, s.Reason).Set(1)
				}
			}
			r.Forget(alive(state))
			return nil
		}}
}

// alive are the objects events may still go to.
func alive(state *observe.ClusterState) map[types.UID]bool {
	m := make(map[types.UID]bool, len(state.Pods)+len(state.PodGroups))
	for _, p := range state.Pods {
		m[p.UID] = true
	}
	for _, g := range state.PodGroups {
		m[g.UID] = true
	}
	return m
}
