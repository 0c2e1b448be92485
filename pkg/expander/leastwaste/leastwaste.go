// Package leastwaste prefers the option that leaves the smallest fraction
// of the new nodes idle: CPU, memory and — what matters on accelerator
// nodes — DRA devices, so an 8-GPU node is not chosen for one GPU pod when
// a 1-GPU node would do.
package leastwaste

import (
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "least-waste"

type strategy struct{}

// New returns the strategy.
func New() expander.Strategy { return strategy{} }

func (strategy) Name() string { return Name }

func (strategy) Best(options []expander.Option) []expander.Option {
	return expander.BestBy(options, Waste)
}

// Waste is the mean idle fraction over CPU, memory and, when the template
// has devices, devices.
func Waste(o expander.Option) float64 {
	if o.Template == nil || o.Template.Node == nil || o.NodeCount == 0 {
		return 1
	}
	alloc := o.Template.Node.Status.Allocatable
	var cpu, mem int64
	for _, p := range o.Pods {
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		cpu += req.Cpu().MilliValue()
		mem += req.Memory().Value()
	}
	n := int64(o.NodeCount)
	parts := []float64{
		idle(cpu, alloc.Cpu().MilliValue()*n),
		idle(mem, alloc.Memory().Value()*n),
	}
	if devices := templateDevices(o); devices > 0 {
		parts = append(parts, idle(int64(o.DevicesUsed), devices*n))
	}
	sum := 0.0
	for _, p := range parts {
		sum += p
	}
	return sum / float64(len(parts))
}

func idle(used, capacity int64) float64 {
	if capacity <= 0 {
		return 0
	}
	f := 1 - float64(used)/float64(capacity)
	return max(f, 0)
}

func templateDevices(o expander.Option) int64 {
	var n int64
	for _, s := range o.Template.ResourceSlices {
		n += int64(len(s.Spec.Devices))
	}
	return n
}
