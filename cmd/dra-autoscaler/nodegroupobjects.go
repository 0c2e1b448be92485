package main

import (
	"k8s.io/client-go/dynamic"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
)

// nodeGroupObjects is the NodeGroup objects' publisher (nil with
// --write-node-group-objects=false). The objects belong to the autoscaler
// its leader lease names: its replicas share them, another autoscaler's
// are left alone.
func (p *parts) nodeGroupObjects(opts *config.Options, dyn dynamic.Interface, b *backoff.Backoff, tracker *track.Tracker) *objects.Publisher {
	if !opts.WriteNodeGroupObjects || dyn == nil {
		return nil
	}
	owner := objects.Identity(opts.LeaderElection.ResourceNamespace, opts.LeaderElection.ResourceName)
	return objects.New(dyn, owner, objects.Sources{Limiter: p.limiter, Backoff: b, Pricing: p.pricing,
		ProvisionTimes: tracker.ProvisionTimes, Devices: estimator.NewDeviceCounter(p.runner).Count,
		ScaleUpFromZero: opts.ScaleUpFromZero})
}
