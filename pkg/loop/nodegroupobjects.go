package loop

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
)

// nodeGroupObjects writes the NodeGroup objects of a pass that ran to its
// end: the groups as read at its start, with what its scale-ups added.
func (l *Loop) nodeGroupObjects(ctx context.Context, p *Pass) error {
	added := map[string]int{}
	usage := clusterUsage(p.cluster.Nodes, p.Groups)
	for _, r := range p.Results {
		if r.Group == nil || r.Added <= 0 {
			continue
		}
		added[r.Group.Id] += r.Added
		if r.Group.Template != nil {
			usage.Add(r.Group.Template.Node, r.Added)
		}
	}
	res := l.NodeGroupObjects.Publish(ctx, objects.PassInput{Now: p.StartedAt, Groups: p.Groups, Exist: l.groupIDs(), Added: added,
		Usage: usage, Reservations: p.reserved, DeviceClasses: p.cluster.DeviceClasses, Unsafe: p.Unsafe})
	klog.FromContext(ctx).V(4).Info("NodeGroup objects", "created", res.Created, "updated", res.Updated, "deleted", res.Deleted, "unchanged", res.Unchanged)
	return nil
}

// groupIDs are the ids of the groups the loop scales, including those a
// pass left out for an invalid answer of the provider.
func (l *Loop) groupIDs() []string {
	groups := l.Groups
	if groups == nil {
		var err error
		if groups, _, err = nodegroups.Restrict(l.Provider.NodeGroups(), l.Options.NodeGroups); err != nil {
			return nil
		}
	}
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.Id()
	}
	return ids
}
