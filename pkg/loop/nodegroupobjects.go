package loop

import (
	"context"

	"k8s.io/klog/v2"

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
	res := l.NodeGroupObjects.Publish(ctx, objects.PassInput{Now: p.StartedAt, Groups: p.Groups, Added: added, Usage: usage,
		Reservations: p.reserved, DeviceClasses: p.cluster.DeviceClasses, Unsafe: p.Unsafe})
	klog.FromContext(ctx).V(4).Info("NodeGroup objects", "created", res.Created, "updated", res.Updated, "deleted", res.Deleted, "unchanged", res.Unchanged)
	return nil
}
