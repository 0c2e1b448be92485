package autoscaler

import (
	"slices"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/balance"
)

// similarity is --balance-similar-node-groups' comparison, nil when off.
// Labels that name the group itself differ between any two groups and
// are ignored, as upstream's providers ignore theirs.
func similarity(opts *config.Options) *balance.Similarity {
	if !opts.Balancing.Enabled {
		return nil
	}
	return balance.New(opts.Balancing.Labels, append(slices.Clone(opts.Balancing.IgnoreLabels), kwok.LabelNodeGroup))
}
