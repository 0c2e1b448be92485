// Package leastwaste prefers the option that leaves the smallest fraction
// of the new nodes idle: CPU, memory and — what matters on accelerator
// nodes — DRA devices, so an 8-GPU node is not chosen for one GPU pod when
// a 1-GPU node would do.
package leastwaste

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

// Name is the --expander value.
const Name = "least-waste"

type strategy struct{ requests *requestCache }

// New returns the strategy.
func New() expander.Strategy { return NewWith(nil) }

// Requests gives a pod's CPU (millicores) and memory (bytes) requests as
// the scheduler counts them, ok false when it does not know the pod.
type Requests func(*corev1.Pod) (cpu, mem int64, ok bool)

// NewWith is New, with the pods' requests taken from known where it knows
// them: the autoscaler hands it the PodInfos the scheduler framework
// computed as the pods arrived, so that a pass does not sum every pending
// pod's containers again.
func NewWith(known Requests) expander.Strategy {
	return strategy{requests: &requestCache{known: known}}
}

func (strategy) Name() string { return Name }

func (s strategy) Best(options []expander.Option) []expander.Option {
	// One lock for the call: it looks up thousands of pods per option.
	s.requests.mu.Lock()
	defer s.requests.mu.Unlock()
	defer s.requests.turn()
	return expander.BestBy(options, func(o expander.Option) float64 { return waste(o, s.requests.get) })
}

// Waste is the mean idle fraction over CPU, memory and, when the template
// has devices, devices.
func Waste(o expander.Option) float64 { return waste(o, podRequests) }

func waste(o expander.Option, requests func(*corev1.Pod) request) float64 {
	if o.Template == nil || o.Template.Node == nil || o.NodeCount == 0 {
		return 1
	}
	alloc := o.Template.Node.Status.Allocatable
	var cpu, mem int64
	for _, p := range o.Pods {
		req := requests(p)
		cpu += req.cpu
		mem += req.mem
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

type request struct{ cpu, mem int64 }

func podRequests(p *corev1.Pod) request {
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	return request{cpu: req.Cpu().MilliValue(), mem: req.Memory().Value()}
}

// requestCache keeps pods' requests from one Best to the next: a planning
// pass asks once per round about mostly the same pods, and summing a
// pod's containers was most of the strategy's cost at 10,000 pods. Pods
// are the informers' objects, never changed in place, so a pointer names
// one pod state; only the pods of the last call are kept.
// Best holds mu around get and turn.
type requestCache struct {
	mu         sync.Mutex
	prev, next map[*corev1.Pod]request
	known      Requests
}

func (c *requestCache) get(p *corev1.Pod) request {
	if r, ok := c.next[p]; ok {
		return r
	}
	r, ok := c.prev[p]
	if !ok && c.known != nil {
		r.cpu, r.mem, ok = c.known(p)
	}
	if !ok {
		r = podRequests(p)
	}
	if c.next == nil {
		// A round asks about as many pods as the last.
		c.next = make(map[*corev1.Pod]request, len(c.prev))
	}
	c.next[p] = r
	return r
}

// turn ends a call: what it asked about is what the next may reuse.
func (c *requestCache) turn() {
	c.prev, c.next = c.next, nil
}
