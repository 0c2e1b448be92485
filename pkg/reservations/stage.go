package reservations

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// Counted is the key of the pass's count of the reservations (nil: none
// at all; Count's methods are safe on nil).
var Counted = pass.NewKey[*Count]("reservations")

// StageName is the name of the stage that counts the reservations.
const StageName = "reservations"

// Stage counts the reservations once for the pass: the planner, scale-down,
// the status and the upkeep read this count. A nil policy counts none.
func (s *Policy) Stage() pass.Stage {
	return pass.Func{ID: StageName, In: pass.Keys(nodegroups.Groups, observe.Cluster), Out: pass.Keys(Counted),
		Do: func(ctx context.Context, st *pass.State) error {
			pass.Put(st, Counted, s.Count(ctx, pass.Get(st, nodegroups.Groups), pass.Get(st, observe.Cluster).Pods, st.Started))
			return nil
		}}
}
