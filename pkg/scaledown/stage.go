package scaledown

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/planner"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
)

// Done is the key of what the scale-down stage did.
var Done = pass.NewKey[*PassResult]("scaleDown")

// StageName is the scale-down stage's name.
const StageName = "scaleDown"

// Stage runs scale-down on the pass's snapshot, unless the cluster is
// unsafe to act on. A scale-up made in the pass starts the cooldown first,
// so a pass never adds and removes nodes at once. Its failure is logged
// and counted; the pass goes on.
type Stage struct {
	Controller *Controller
	// Observed gives the informers scale-down reads beside the pass's
	// state (disruption budgets, controllers).
	Observed *observe.Stage
	Gate     *safety.Gate
	// Observe times the stage ("scaleDown"); Failed counts an error by
	// kind. Each may be nil.
	Observe func(function string, start time.Time)
	Failed  func(kind string)
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string { return StageName }
func (*Stage) Reads() []pass.AnyKey {
	return pass.Keys(observe.Unsafe, observe.Cluster, nodegroups.Groups, load.Built, reservations.Counted, act.Results)
}
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Done) }
func (*Stage) Acts() bool            { return true }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	if unsafe := pass.Get(st, observe.Unsafe); unsafe != "" {
		// Not even planned: unneeded times must not run on during an
		// outage, or the nodes it took would go the moment it ends.
		s.Gate.Hold(safety.ActionScaleDown, safety.RuleUnhealthy, unsafe)
		return nil
	}
	for _, r := range pass.Get(st, act.Results) {
		if r.Added > 0 {
			s.Controller.NoteScaleUp(st.Started)
		}
	}
	obs := s.Observed.Observer
	in := ControllerInput{State: pass.Get(st, observe.Cluster), PDBs: obs, Owners: obs.ControllerExists,
		Groups: pass.Get(st, nodegroups.Groups), Nodes: pass.Get(st, load.Built).Nodes, Now: st.Started}
	if c := pass.Get(st, reservations.Counted); c != nil {
		// Reserved nodes go last and idle paid capacity stays.
		in.Policies = []planner.NodePolicy{c}
	}
	start := time.Now()
	res, err := s.Controller.Run(ctx, in)
	if s.Observe != nil {
		s.Observe("scaleDown", start)
	}
	if err != nil {
		if s.Failed != nil {
			s.Failed("simulationError")
		}
		klog.FromContext(ctx).Error(err, "Scale-down failed; the pass goes on")
		return nil
	}
	pass.Put(st, Done, res)
	return nil
}
