package stranded

import (
	"context"
	"time"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/placement"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// StageName is the sharing stage's name.
const StageName = "sharing"

// Stage measures stranded DRA capacity on the freshly built snapshot
// (Meter, optional) and applies the prioritized-list policy to the single
// pods about to be fitted (placement.Placer.PreferFirstAlternative).
type Stage struct {
	Meter    *Meter
	Placer   *placement.Placer
	Snapshot func() *snapshot.Snapshot
	// Observe times the meter ("strandedCapacity"); nil: not timed.
	Observe func(function string, start time.Time)
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string { return StageName }
func (*Stage) Reads() []pass.AnyKey {
	return pass.Keys(observe.Cluster, load.Built, nodegroups.Groups, pending.Loose)
}
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(pending.Loose) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	cluster, groups := pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups)
	if s.Meter != nil {
		start := time.Now()
		s.Meter.Run(ctx, MeterInput{Snapshot: s.Snapshot(), Pods: cluster.Pods, Nodes: pass.Get(st, load.Built).Nodes,
			GroupOf: nodegroups.GroupOf(groups), DeviceClasses: cluster.DeviceClasses}, st.Started)
		if s.Observe != nil {
			s.Observe("strandedCapacity", start)
		}
	}
	var templates []*cloudprovider.NodeTemplate
	for _, g := range groups {
		if g.Template != nil {
			templates = append(templates, g.Template)
		}
	}
	pass.Put(st, pending.Loose, s.Placer.PreferFirstAlternative(ctx, pass.Get(st, pending.Loose), templates))
	return nil
}
