package load

import (
	"context"
	"fmt"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Built is the key of what the snapshot stage loaded.
var Built = pass.NewKey[*Loaded]("snapshot")

// StageName is the snapshot stage's name.
const StageName = "snapshot"

// Stage loads the cluster into the simulation. A snapshot missing part of
// the cluster would make every decision on a wrong picture: the pass
// stops before anything acts.
type Stage struct {
	Runner           *framework.Runner
	PodInfos         *PodInfos
	ExpendableCutoff int
	// Observe times the stage ("snapshot" in function_duration_seconds);
	// nil: not timed.
	Observe func(function string, start time.Time)
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string          { return StageName }
func (*Stage) Reads() []pass.AnyKey  { return pass.Keys(observe.Cluster, nodegroups.Groups) }
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Built) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	start := time.Now()
	built, err := Build(ctx, s.Runner.Snapshot(), pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups),
		Options{ExpendableCutoff: s.ExpendableCutoff, Runner: s.Runner, PodInfos: s.PodInfos})
	if s.Observe != nil {
		s.Observe("snapshot", start)
	}
	if err != nil {
		return pass.Failed("snapshotError", fmt.Errorf("snapshot: %w", err))
	}
	pass.Put(st, Built, built)
	return nil
}
