package upkeep

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
)

// StageName is the upkeep stage's name.
const StageName = "reservationUpkeep"

// Stage writes the reservations' status and events, and drains the nodes
// of ending capacity blocks, from the pass's count.
func (k *Keeper) Stage() pass.Stage {
	return pass.Func{ID: StageName, Acting: true, In: pass.Keys(reservations.Counted, observe.Cluster),
		Do: func(ctx context.Context, st *pass.State) error {
			cluster := pass.Get(st, observe.Cluster)
			k.Run(ctx, pass.Get(st, reservations.Counted), cluster.Pods,
				drainability.NewGangs(cluster.PodGroups, cluster.CompositePodGroups, cluster.Pods))
			return nil
		}}
}
