// Package nodegroups is the autoscaler's per-loop view of the node groups:
// which registered nodes belong to each, how many are still coming, the
// sizes it may scale between, and what a new node of the group looks like.
package nodegroups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// Info is one node group as seen in one loop.
type Info struct {
	Group    cloudprovider.NodeGroup
	Id       string
	Min, Max int
	// Target is the provider's target size.
	Target int
	// Ready are the group's registered nodes that can take pods as the
	// template says: Ready and with their DRA drivers' slices published.
	Ready []*corev1.Node
	// Booting are registered nodes that are not usable yet; the simulation
	// treats them as the template would be, under their own name.
	// NotUsable says why, by node name (see Usable).
	Booting   []*corev1.Node
	NotUsable map[string]string
	// Stale are the booting nodes older than the provision time, or
	// whose DRA pools stalled: they are no longer coming, so the
	// simulation takes them as they are (a dead node's taints, an
	// incomplete pool's missing devices keep pods off it) instead of as
	// the template.
	Stale map[string]bool
	// Stalled are the booting nodes, Ready and untainted, whose drivers'
	// pools stayed incomplete and unchanged for the pool stall time.
	Stalled map[string]StalledPool
	// Template is what a new node of the group looks like; nil with
	// TemplateErr set when neither a healthy node nor the provider gives one.
	Template    *cloudprovider.NodeTemplate
	TemplateErr error
	// TemplateSource says where the template came from, for logs and
	// explanations: "node/<name>" or "provider"; TemplateSkipped lists the
	// registered nodes that were not used and why ("node/<name>: ...").
	TemplateSource  string
	TemplateSkipped []string
	// Options are what the group runs with (ResolveOptions): the
	// provider's over the flags'; OptionsFrom says which.
	Options     cloudprovider.NodeGroupAutoscalingOptions
	OptionsFrom string

	declared    *cloudprovider.NodeTemplate
	declaredErr error
}

// Upcoming is how many nodes are requested but not registered yet.
func (i *Info) Upcoming() int {
	n := i.Target - len(i.Ready) - len(i.Booting)
	if n < 0 {
		return 0
	}
	return n
}

// Size is the group's size for limits: the target, or the registered
// nodes when more are registered than targeted.
func (i *Info) Size() int {
	return max(i.Target, len(i.Ready)+len(i.Booting))
}

// Restrict applies --nodes: only the named groups are scaled, with the
// sizes given there. A name the provider does not know is an error.
func Restrict(groups []cloudprovider.NodeGroup, specs []config.NodeGroupSpec) ([]cloudprovider.NodeGroup, map[string]config.NodeGroupSpec, error) {
	sizes := map[string]config.NodeGroupSpec{}
	for _, g := range groups {
		sizes[g.Id()] = config.NodeGroupSpec{Name: g.Id(), Min: g.MinSize(), Max: g.MaxSize()}
	}
	if len(specs) == 0 {
		return groups, sizes, nil
	}
	byID := map[string]cloudprovider.NodeGroup{}
	for _, g := range groups {
		byID[g.Id()] = g
	}
	var out []cloudprovider.NodeGroup
	restricted := map[string]config.NodeGroupSpec{}
	for _, s := range specs {
		g, ok := byID[s.Name]
		if !ok {
			known := make([]string, 0, len(byID))
			for id := range byID {
				known = append(known, id)
			}
			sort.Strings(known)
			return nil, nil, fmt.Errorf("--nodes names node group %q, which the cloud provider does not have (it has: %v)", s.Name, known)
		}
		out = append(out, g)
		restricted[s.Name] = s
	}
	return out, restricted, nil
}

// TemplateBuilder makes a group's template from a healthy node of the group
// or, when there is none, from the provider; in both cases adding the pods
// of the cluster's DaemonSets that would run there.
type TemplateBuilder interface {
	FromNode(ctx context.Context, node *corev1.Node, slices []*resourceapi.ResourceSlice, pods []*corev1.Pod) (*cloudprovider.NodeTemplate, error)
	FromProvider(ctx context.Context, tmpl *cloudprovider.NodeTemplate, daemonSets []*appsv1.DaemonSet) (*cloudprovider.NodeTemplate, error)
}

// CollectInput is what Collect looks at.
type CollectInput struct {
	Groups       []cloudprovider.NodeGroup
	Sizes        map[string]config.NodeGroupSpec
	Provider     cloudprovider.CloudProvider
	Nodes        []*corev1.Node
	SlicesByNode map[string][]*resourceapi.ResourceSlice
	PodsByNode   map[string][]*corev1.Pod
	DaemonSets   []*appsv1.DaemonSet
	// CSINodes are the registered nodes' CSINodes by node name.
	CSINodes map[string]*storagev1.CSINode
	// Defaults are the flags' autoscaling options, each group's own
	// resolved over them (ResolveOptions).
	Defaults cloudprovider.NodeGroupAutoscalingOptions
	// Now and the group's MaxNodeProvisionTime tell stale booting nodes
	// (zero: none is); PoolStall those whose DRA pools stalled (zero:
	// none did).
	Now       time.Time
	PoolStall time.Duration
}

// StalledPool is a node's incomplete DRA pool that has not changed for
// the pool stall time (--dra-pool-stall-time): its driver is stuck, so
// the node is no longer counted on for the devices its template has.
type StalledPool struct {
	Driver string
	// Pool is the first incomplete pool ("" when the driver published
	// none); Why says what is missing.
	Pool, Why string
	// Since is when the driver's slices last changed.
	Since time.Time
}

// Collect builds the loop's view of the groups from the provider and the
// observed nodes, slices and pods.
func Collect(ctx context.Context, in CollectInput, templates TemplateBuilder) ([]*Info, error) {
	logger := klog.FromContext(ctx)
	groups, sizes, provider := in.Groups, in.Sizes, in.Provider
	// In name order: the informers list nodes in no order, and a
	// group's first ready node becomes its template; the same cluster
	// must give the same templates every pass.
	nodes := slices.SortedFunc(slices.Values(in.Nodes), func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	infos := make([]*Info, 0, len(groups))
	byID := map[string]*Info{}
	for _, g := range groups {
		target, err := g.TargetSize()
		if errors.Is(err, cloudprovider.ErrInvalidAnswer) {
			// Bad input for this group only: its nodes belong to no
			// group this pass (nothing scales them), the others go on.
			logger.Error(err, "Node group left out of this pass: the provider's answer is invalid", "nodeGroup", g.Id())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node group %s: target size: %w", g.Id(), err)
		}
		s := sizes[g.Id()]
		info := &Info{Group: g, Id: g.Id(), Min: s.Min, Max: s.Max, Target: target}
		info.Options, info.OptionsFrom = ResolveOptions(ctx, g, in.Defaults)
		info.declared, info.declaredErr = g.TemplateNodeInfo()
		infos = append(infos, info)
		byID[g.Id()] = info
	}
	for _, node := range nodes {
		g, err := provider.NodeGroupForNode(node)
		if err != nil {
			logger.Error(err, "Cannot tell the node group of a node; leaving it out of scaling", "node", node.Name)
			continue
		}
		if g == nil || byID[g.Id()] == nil {
			continue
		}
		info := byID[g.Id()]
		var expected []*resourceapi.ResourceSlice
		if info.declared != nil {
			expected = info.declared.ResourceSlices
		}
		ok, why, short := usable(node, expected, in.SlicesByNode[node.Name])
		if ok {
			info.Ready = append(info.Ready, node)
			continue
		}
		info.Booting = append(info.Booting, node)
		if info.NotUsable == nil {
			info.NotUsable = map[string]string{}
		}
		info.NotUsable[node.Name] = why
		provision := info.Options.MaxNodeProvisionTime
		stale := provision > 0 && in.Now.After(node.CreationTimestamp.Add(provision))
		if short != nil && in.PoolStall > 0 {
			if since := lastPoolChange(node, short.driver, in.SlicesByNode[node.Name]); in.Now.Sub(since) > in.PoolStall {
				if info.Stalled == nil {
					info.Stalled = map[string]StalledPool{}
				}
				info.Stalled[node.Name] = StalledPool{Driver: short.driver, Pool: short.pool, Why: why, Since: since}
				stale = true
			}
		}
		if stale {
			if info.Stale == nil {
				info.Stale = map[string]bool{}
			}
			info.Stale[node.Name] = true
		}
	}
	identities := deviceIdentities(in.SlicesByNode)
	for _, info := range infos {
		info.buildTemplate(ctx, in, templates, identities)
		if info.TemplateErr != nil {
			logger.Error(info.TemplateErr, "No template for node group; it cannot be scaled up", "nodeGroup", info.Id)
			continue
		}
		logger.V(4).Info("Node group", "nodeGroup", info.Id, "target", info.Target, "ready", len(info.Ready),
			"booting", len(info.Booting), "template", info.TemplateSource, "labels", info.Template.Node.Labels)
	}
	return infos, nil
}

// sampledNodes is how many nodes' slices identities looks at.
const sampledNodes = 64

// deviceIdentities are the device attributes that tell devices apart
// (attrreads.Identities) over the slices of the first sampledNodes nodes
// by name.
func deviceIdentities(byNode map[string][]*resourceapi.ResourceSlice) map[string]bool {
	var sample []*resourceapi.ResourceSlice
	for i, n := range slices.Sorted(maps.Keys(byNode)) {
		if i == sampledNodes {
			break
		}
		sample = append(sample, byNode[n]...)
	}
	return attrreads.Identities(sample)
}

func (i *Info) buildTemplate(ctx context.Context, in CollectInput, templates TemplateBuilder, identities map[string]bool) {
	// A real node shows what the group really gets (kubelet-computed
	// allocatable, the devices the drivers really publish).
	// Nodes still booting (NotReady, start-up taints, incomplete pools)
	// never are: they would teach the group a shape it does not have.
	for _, node := range i.Booting {
		i.TemplateSkipped = append(i.TemplateSkipped, "node/"+node.Name+": "+i.NotUsable[node.Name])
	}
	for _, node := range i.Ready {
		if node.DeletionTimestamp != nil || node.Spec.Unschedulable {
			i.TemplateSkipped = append(i.TemplateSkipped, "node/"+node.Name+": being deleted or cordoned")
			continue
		}
		tmpl, err := templates.FromNode(ctx, node, in.SlicesByNode[node.Name], in.PodsByNode[node.Name])
		if err == nil {
			// Its devices' uuids are its own, not the next node's.
			template.HideIdentities(tmpl, identities)
			tmpl.CSINode = template.CSINodeOf(in.CSINodes[node.Name])
			tmpl.KeepLaunchChoices(i.declared)
			i.Template, i.TemplateSource = tmpl, "node/"+node.Name
			return
		}
		i.TemplateSkipped = append(i.TemplateSkipped, "node/"+node.Name+": "+err.Error())
		klog.FromContext(ctx).V(2).Info("Node unusable as template", "nodeGroup", i.Id, "node", node.Name, "err", err)
	}
	if i.declaredErr != nil || i.declared == nil {
		i.TemplateErr = fmt.Errorf("node group %s: no healthy node and no template from the provider: %v", i.Id, i.declaredErr)
		return
	}
	var err error
	if i.Template, err = templates.FromProvider(ctx, i.declared, in.DaemonSets); err != nil {
		i.TemplateErr = fmt.Errorf("node group %s: template: %w", i.Id, err)
		return
	}
	i.TemplateSource = "provider"
}
