package nodegroups_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// A group's options: the provider's over the flags', field by field; a
// provider without them, or one that fails, leaves the flags'; zero
// durations and negative thresholds are not said.
func TestResolveOptions(t *testing.T) {
	flags := cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGpuUtilizationThreshold: 0.5,
		ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute}
	type optionsFunc = func(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error)
	set := func(f func(*cloudprovider.NodeGroupAutoscalingOptions)) optionsFunc {
		return func(d cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
			f(&d)
			return &d, nil
		}
	}
	with := func(f func(*cloudprovider.NodeGroupAutoscalingOptions)) cloudprovider.NodeGroupAutoscalingOptions {
		o := flags
		f(&o)
		return o
	}
	tests := []struct {
		name    string
		options optionsFunc
		want    cloudprovider.NodeGroupAutoscalingOptions
		from    string
	}{
		{name: "none", want: flags, from: nodegroups.OptionsFromFlags},
		{name: "the provider fails", options: func(cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
			return nil, errors.New("unavailable")
		}, want: flags, from: nodegroups.OptionsFromFlags},
		{name: "the defaults echoed", options: func(d cloudprovider.NodeGroupAutoscalingOptions) (*cloudprovider.NodeGroupAutoscalingOptions, error) {
			if d != flags {
				return nil, fmt.Errorf("defaults %+v are not the flags'", d)
			}
			return &d, nil
		}, want: flags, from: nodegroups.OptionsFromFlags},
		{name: "an unneeded time", options: set(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownUnneededTime = time.Hour }),
			want: with(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownUnneededTime = time.Hour }), from: nodegroups.OptionsFromProvider},
		{name: "a provision time", options: set(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.MaxNodeProvisionTime = time.Hour }),
			want: with(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.MaxNodeProvisionTime = time.Hour }), from: nodegroups.OptionsFromProvider},
		{name: "a threshold of zero", options: set(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownGpuUtilizationThreshold = 0 }),
			want: with(func(o *cloudprovider.NodeGroupAutoscalingOptions) { o.ScaleDownGpuUtilizationThreshold = 0 }), from: nodegroups.OptionsFromProvider},
		{name: "zero times and negative thresholds are not said", options: set(func(o *cloudprovider.NodeGroupAutoscalingOptions) {
			*o = cloudprovider.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: -1, ScaleDownGpuUtilizationThreshold: -1}
		}), want: flags, from: nodegroups.OptionsFromFlags},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			g := fakeprovider.NewGroup("g", 0, 5)
			if tc.options != nil {
				g = g.WithOptions(tc.options)
			}
			got, from := nodegroups.ResolveOptions(ctx, g, flags)
			if got != tc.want || from != tc.from {
				t.Errorf("options %+v from %s, want %+v from %s", got, from, tc.want, tc.from)
			}
		})
	}
}
