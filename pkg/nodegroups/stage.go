package nodegroups

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// Groups is the key of the pass's view of the node groups.
var Groups = pass.NewKey[[]*Info]("nodeGroups")

// Stage names.
const (
	RefreshStageName = "refresh"
	StageName        = "nodeGroups"
)

// RefreshStage is the provider's Refresh, first in every pass.
func RefreshStage(provider cloudprovider.CloudProvider) pass.Stage {
	return pass.Func{ID: RefreshStageName, Do: func(ctx context.Context, _ *pass.State) error {
		if err := provider.Refresh(ctx); err != nil {
			return pass.Failed("cloudProviderError", fmt.Errorf("refresh cloud provider: %w", err))
		}
		return nil
	}}
}

// Stage collects the pass's view of the groups from the provider and the
// observed cluster.
type Stage struct {
	Provider cloudprovider.CloudProvider
	// Fixed and Sizes fix the groups (unit tests); nil: every pass reads
	// them from the provider after its Refresh, restricted by Specs
	// (--nodes), so groups a provider discovers later (Cluster API
	// auto-discovery, an external server) are scaled without a restart.
	Fixed []cloudprovider.NodeGroup
	Sizes map[string]config.NodeGroupSpec
	Specs []config.NodeGroupSpec
	// Prepare readies the simulation to judge templates against this
	// pass's device classes and claim templates.
	Prepare   func(context.Context, *observe.ClusterState) error
	Templates TemplateBuilder
	// Defaults are the flags' autoscaling options (per-group options
	// override them).
	Defaults  cloudprovider.NodeGroupAutoscalingOptions
	PoolStall time.Duration
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string          { return StageName }
func (*Stage) Reads() []pass.AnyKey  { return pass.Keys(observe.Cluster) }
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Groups) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	state := pass.Get(st, observe.Cluster)
	if s.Prepare != nil {
		if err := s.Prepare(ctx, state); err != nil {
			return pass.Failed("snapshotError", err)
		}
	}
	slicesByNode, podsByNode := indexByNode(state)
	ids, sizes, err := s.IDs()
	if err != nil {
		return pass.Failed("cloudProviderError", fmt.Errorf("node groups: %w", err))
	}
	groups, err := Collect(ctx, CollectInput{Groups: ids, Sizes: sizes, Provider: s.Provider,
		Nodes: state.Nodes, SlicesByNode: slicesByNode, PodsByNode: podsByNode, DaemonSets: state.DaemonSets,
		CSINodes: state.CSINodes, Now: st.Started, Defaults: s.Defaults, PoolStall: s.PoolStall}, s.Templates)
	if err != nil {
		return pass.Failed("cloudProviderError", err)
	}
	pass.Put(st, Groups, groups)
	return nil
}

// IDs are the groups the pass scales, with their sizes.
func (s *Stage) IDs() ([]cloudprovider.NodeGroup, map[string]config.NodeGroupSpec, error) {
	if s.Fixed != nil {
		return s.Fixed, s.Sizes, nil
	}
	return Restrict(s.Provider.NodeGroups(), s.Specs)
}

func indexByNode(state *observe.ClusterState) (map[string][]*resourceapi.ResourceSlice, map[string][]*corev1.Pod) {
	slices := make(map[string][]*resourceapi.ResourceSlice, len(state.Nodes))
	for _, sl := range state.ResourceSlices {
		if sl.Spec.NodeName != nil {
			slices[*sl.Spec.NodeName] = append(slices[*sl.Spec.NodeName], sl)
		}
	}
	pods := make(map[string][]*corev1.Pod, len(state.Nodes))
	for _, p := range state.Pods {
		if p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p)
		}
	}
	return slices, pods
}

// GroupOf maps the registered nodes of groups to their group's id.
func GroupOf(groups []*Info) map[string]string {
	out := map[string]string{}
	for _, g := range groups {
		for _, n := range g.Ready {
			out[n.Name] = g.Id
		}
		for _, n := range g.Booting {
			out[n.Name] = g.Id
		}
	}
	return out
}
