package objects

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
)

// StageName is the NodeGroup objects' stage name.
const StageName = "nodeGroupObjects"

// Stage writes the NodeGroup objects of a pass that ran to its end: the
// groups as read at its start, with what its scale-ups added. exist names
// every group the loop scales, those a pass left out included.
func (p *Publisher) Stage(exist func() []string) pass.Stage {
	return pass.Func{ID: StageName, Acting: true,
		In: pass.Keys(observe.Cluster, observe.Unsafe, nodegroups.Groups, act.Results, reservations.Counted),
		Do: func(ctx context.Context, st *pass.State) error {
			cluster, groups := pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups)
			added := map[string]int{}
			usage := pending.ClusterUsage(cluster.Nodes, groups)
			for _, r := range pass.Get(st, act.Results) {
				if r.Group == nil || r.Added <= 0 {
					continue
				}
				added[r.Group.Id] += r.Added
				if r.Group.Template != nil {
					usage.Add(r.Group.Template.Node, r.Added)
				}
			}
			res := p.Publish(ctx, PublishInput{Now: st.Started, Groups: groups, Exist: exist(), Added: added, Usage: usage,
				Reservations: pass.Get(st, reservations.Counted), DeviceClasses: cluster.DeviceClasses, Unsafe: pass.Get(st, observe.Unsafe),
				Rooms: NodeRooms(cluster, groups)})
			klog.FromContext(ctx).V(4).Info("NodeGroup objects", "created", res.Created, "updated", res.Updated, "deleted", res.Deleted, "unchanged", res.Unchanged)
			return nil
		}}
}
