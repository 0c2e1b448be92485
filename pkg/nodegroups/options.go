package nodegroups

import (
	"context"
	"errors"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// Where a group's options come from (Info.OptionsFrom).
const (
	OptionsFromFlags    = "flags"
	OptionsFromProvider = "provider"
)

// ResolveOptions are the options group g runs with: the provider's own
// (GetOptions, given the flags' values as defaults: upstream's per-group
// options, a Cluster API MachineDeployment's autoscaling-options
// annotations, a gRPC server's NodeGroupGetOptions) over defaults. A
// provider that has none, or fails to say (logged), leaves the defaults;
// a zero duration or a negative threshold is "not said" (a server
// answering with upstream's older message, a field it does not know).
// from is OptionsFromProvider when any value differs from the defaults.
func ResolveOptions(ctx context.Context, g cloudprovider.NodeGroup, defaults cloudprovider.NodeGroupAutoscalingOptions) (cloudprovider.NodeGroupAutoscalingOptions, string) {
	if g == nil {
		return defaults, OptionsFromFlags
	}
	o, err := g.GetOptions(defaults)
	switch {
	case errors.Is(err, cloudprovider.ErrNotImplemented):
		return defaults, OptionsFromFlags
	case err != nil:
		klog.FromContext(ctx).V(2).Info("Node group options unavailable, using the flags' values", "nodeGroup", g.Id(), "err", err)
		return defaults, OptionsFromFlags
	case o == nil:
		return defaults, OptionsFromFlags
	}
	out := defaults
	for _, f := range []struct {
		got  float64
		into *float64
	}{{o.ScaleDownUtilizationThreshold, &out.ScaleDownUtilizationThreshold}, {o.ScaleDownGpuUtilizationThreshold, &out.ScaleDownGpuUtilizationThreshold}} {
		if f.got >= 0 {
			*f.into = f.got
		}
	}
	if o.ScaleDownUnneededTime > 0 {
		out.ScaleDownUnneededTime = o.ScaleDownUnneededTime
	}
	if o.ScaleDownUnreadyTime > 0 {
		out.ScaleDownUnreadyTime = o.ScaleDownUnreadyTime
	}
	if o.MaxNodeProvisionTime > 0 {
		out.MaxNodeProvisionTime = o.MaxNodeProvisionTime
	}
	out.ZeroOrMaxNodeScaling = o.ZeroOrMaxNodeScaling
	if out == defaults {
		return out, OptionsFromFlags
	}
	return out, OptionsFromProvider
}
