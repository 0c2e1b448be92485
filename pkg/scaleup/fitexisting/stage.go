package fitexisting

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Keys the stage writes: the pods still pending after existing and coming
// nodes took what they could, and where the others go (by node name).
var (
	Pending = pass.NewKey[[]*corev1.Pod]("pendingAfterFit")
	Fits    = pass.NewKey[map[*corev1.Pod]string]("fits")
)

// StageName is the fit-existing stage's name.
const StageName = "fitExisting"

// Ranker is the placement policy around a pass's fits
// (placement.Placer).
type Ranker interface {
	StartPass()
	EndPass(ctx context.Context)
	RankFeasible(ctx context.Context, pod *corev1.Pod, feasible []string) ([]string, error)
	LogChoices(ctx context.Context, fits map[*corev1.Pod]string)
}

// Stage places the pods planned alone on the existing and coming nodes.
type Stage struct {
	Runner *framework.Runner
	// Options are FitWith's but for Rank and Keys, which the stage sets
	// from Ranker and NodeKeys for each pass.
	Options Options
	Ranker  Ranker
	// NodeKeys (optional) tells, per pass, which nodes look alike to the
	// filters, so the stage asks about one node of each kind.
	NodeKeys func(*snapshot.Snapshot, []*corev1.Pod) (Keys, error)
	// Observe times the stage ("filterOutSchedulable"); nil: not timed.
	Observe func(function string, start time.Time)
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string          { return StageName }
func (*Stage) Reads() []pass.AnyKey  { return pass.Keys(pending.Loose, load.Built) }
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Pending, Fits) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	start := time.Now()
	loose := pass.Get(st, pending.Loose)
	opts := s.Options
	if s.Ranker != nil {
		s.Ranker.StartPass()
		opts.Rank = s.Ranker.RankFeasible
	}
	if s.NodeKeys != nil {
		keys, err := s.NodeKeys(s.Runner.Snapshot(), loose)
		if err != nil {
			return pass.Failed("simulationError", err)
		}
		opts.Keys = keys
	} else {
		opts.Copier = nil
	}
	rest, fits, err := FitWith(ctx, s.Runner, loose, pass.Get(st, load.Built).Candidates(), opts)
	if s.Ranker != nil {
		s.Ranker.EndPass(ctx)
	}
	if err != nil {
		return pass.Failed("simulationError", err)
	}
	if s.Ranker != nil {
		s.Ranker.LogChoices(ctx, fits)
	}
	if s.Observe != nil {
		s.Observe("filterOutSchedulable", start)
	}
	pass.Put(st, Pending, rest)
	pass.Put(st, Fits, fits)
	return nil
}
