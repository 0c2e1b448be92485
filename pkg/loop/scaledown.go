package loop

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/planner"
)

// scaleDown runs the scale-down stage on this pass's snapshot, unless the
// cluster is unsafe to act on. A scale-up made in this pass starts the
// cooldown first, so a pass never adds and removes nodes at once. Its
// failure is logged and counted; the loop goes on.
func (l *Loop) scaleDown(ctx context.Context, pass *Pass) error {
	if pass.Unsafe != "" {
		// Not even planned: unneeded times must not run on during an
		// outage, or the nodes it took would go the moment it ends.
		l.Gate.Hold(safety.ActionScaleDown, safety.RuleUnhealthy, pass.Unsafe)
		return nil
	}
	now := pass.StartedAt
	for _, r := range pass.Results {
		if r.Added > 0 {
			l.ScaleDown.NoteScaleUp(now)
		}
	}
	in := scaledown.ControllerInput{State: pass.cluster, PDBs: l.Observer, Owners: l.Observer.ControllerExists,
		Groups: pass.Groups, Nodes: pass.built.Nodes, Now: now}
	if pass.reserved != nil {
		// Reserved nodes go last and idle paid capacity stays.
		in.Policies = []planner.NodePolicy{pass.reserved}
	}
	start := time.Now()
	res, err := l.ScaleDown.Run(ctx, in)
	l.Metrics.Observe("scaleDown", start)
	if err != nil {
		l.Metrics.Errors.WithLabelValues("simulationError").Inc()
		klog.FromContext(ctx).Error(err, "Scale-down failed; the loop goes on")
		return nil
	}
	pass.ScaleDown = res
	return nil
}
