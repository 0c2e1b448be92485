package observe

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/health"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// Keys the observe stage writes.
var (
	// Cluster is what the pass observed.
	Cluster = pass.NewKey[*ClusterState]("cluster")
	// Unsafe says why the cluster is too unhealthy to act on ("" when it
	// is healthy): too many unready nodes (pkg/health).
	Unsafe = pass.NewKey[string]("unsafe")
)

// StageName is the observe stage's name.
const StageName = "observe"

// Stage lists the cluster from the informers and judges whether it is
// healthy enough to act on. Observer is set once the informers exist
// (the wiring starts them when the replica leads).
type Stage struct {
	Observer *Observer
	Health   health.Options
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string          { return StageName }
func (*Stage) Reads() []pass.AnyKey  { return nil }
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Cluster, Unsafe) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	if s.Observer == nil {
		return pass.Failed("apiCallError", fmt.Errorf("observe: the informers are not started"))
	}
	state, err := s.Observer.Observe()
	if err != nil {
		return pass.Failed("apiCallError", fmt.Errorf("observe: %w", err))
	}
	pass.Put(st, Cluster, state)
	verdict := health.Check(state.Nodes, st.Started, s.Health)
	pass.Put(st, Unsafe, verdict.Reason)
	if !verdict.Healthy {
		klog.FromContext(ctx).Info("Cluster unhealthy; planning only, no scale-up or scale-down", "reason", verdict.Reason)
	}
	return nil
}
