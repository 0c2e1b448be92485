package upkeep

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// StageName is the upkeep stage's name.
const StageName = "reservationUpkeep"

// Stage writes the reservations' status and events, and drains the nodes
// of ending capacity blocks, from the pass's count.
func (k *Keeper) Stage() pass.Stage {
	return pass.Func{ID: StageName, Acting: true, In: pass.Keys(reservations.Counted, observe.Cluster),
		Do: func(ctx context.Context, st *pass.State) error {
			k.Run(ctx, pass.Get(st, reservations.Counted), pass.Get(st, observe.Cluster).Pods)
			return nil
		}}
}
