package provreq

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Decided is the key of what a pass decided for the requests.
var Decided = pass.NewKey[*Decisions]("provisioningRequests")

// Stage names: the requests are decided (booked, answered, planned) by
// one stage, which a dry run runs too, and launched and told by another,
// which acts.
const (
	StageName       = "provisioningRequests"
	LaunchStageName = "provisioningRequestLaunch"
)

// Service holds the processor once Start made it: nil while the replica
// does not lead, and when ProvisioningRequests are off or not served,
// and then the stages do nothing.
type Service struct{ P *Processor }

// WithoutConsumers drops the pods that consume a request when requests
// are served (their capacity is the request's to provide).
func (s *Service) WithoutConsumers(pods []*corev1.Pod) []*corev1.Pod {
	if s.P == nil {
		return pods
	}
	return WithoutConsumers(pods)
}

// Stage decides the requests before gangs and pods ask: their capacity is
// booked in the snapshot and taken from the pass's usage. An unhealthy
// cluster serves none (nothing it decides could be launched).
func (s *Service) Stage(runner *framework.Runner, planner *plan.Planner) pass.Stage {
	return pass.Func{ID: StageName,
		In:  pass.Keys(observe.Unsafe, observe.Cluster, load.Built, nodegroups.Groups, pending.Usage, reservations.Counted),
		Out: pass.Keys(Decided, pending.Usage),
		Do: func(ctx context.Context, st *pass.State) error {
			if s.P == nil || pass.Get(st, observe.Unsafe) != "" {
				return nil
			}
			d, usage := s.P.Decide(ctx, ProcessInput{Runner: runner, Candidates: pass.Get(st, load.Built).Candidates(),
				Groups: pass.Get(st, nodegroups.Groups), Usage: pass.Get(st, pending.Usage),
				Planner: planner.ForCount(pass.Get(st, reservations.Counted)), Pods: pass.Get(st, observe.Cluster).Pods, Now: st.Started})
			pass.Put(st, Decided, d)
			pass.Put(st, pending.Usage, usage)
			return nil
		}}
}

// LaunchStage makes the scale-ups the requests were decided, and writes
// their conditions and events, while this replica leads (leads, nil:
// always).
func (s *Service) LaunchStage(leads func() bool) pass.Stage {
	return pass.Func{ID: LaunchStageName, Acting: true, In: pass.Keys(Decided), Out: pass.Keys(act.Results, pending.Usage),
		Do: func(ctx context.Context, st *pass.State) error {
			d := pass.Get(st, Decided)
			if s.P == nil || d == nil {
				return nil
			}
			if leads != nil && !leads() {
				d.Drop(ctx)
				return nil
			}
			results, usage := s.P.Launch(ctx, d)
			pass.Put(st, pending.Usage, usage)
			pass.Update(st, act.Results, func(rs []act.LaunchResult) []act.LaunchResult { return append(rs, results...) })
			return nil
		}}
}
