package act

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// Keys: the scale-ups the pass planned (every planning stage appends its
// own), and what came of those it made (ProvisioningRequests' launches
// first, then the act stage's).
var (
	Planned = pass.NewKey[[]ScaleUp]("scaleUps")
	Results = pass.NewKey[[]LaunchResult]("launched")
)

// StageName is the act stage's name.
const StageName = "act"

// Stage makes the planned scale-ups, unless the cluster is unsafe to act
// on or this replica no longer leads (leads, nil: always). Every launch of
// the pass, ProvisioningRequests' included, is told to the reservations'
// count.
func (a *Launcher) Stage(leads func() bool) pass.Stage {
	return pass.Func{ID: StageName, Acting: true,
		In:  pass.Keys(Planned, observe.Unsafe, reservations.Counted),
		Out: pass.Keys(Results),
		Do: func(ctx context.Context, st *pass.State) error {
			ups, unsafe := pass.Get(st, Planned), pass.Get(st, observe.Unsafe)
			switch {
			case len(ups) > 0 && unsafe != "":
				klog.FromContext(ctx).Info("Cluster unhealthy; planned scale-ups not made", "reason", unsafe, "scaleUps", len(ups))
			case len(ups) > 0 && leads != nil && !leads():
				klog.FromContext(ctx).Info("No longer holding the leader lease; planned scale-ups not made", "scaleUps", len(ups))
			case len(ups) > 0:
				pass.Update(st, Results, func(rs []LaunchResult) []LaunchResult { return append(rs, a.Execute(ctx, ups, st.Started)...) })
			}
			count := pass.Get(st, reservations.Counted)
			for _, r := range pass.Get(st, Results) {
				count.Launched(r.Group.Id, r.Group.Size(), r.Added, st.Started)
			}
			return nil
		}}
}
