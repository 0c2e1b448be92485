package load

import (
	"context"
	"runtime"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// PodInfos keeps the scheduler's PodInfo of each pod from one pass to the
// next: the snapshot's placed pods, and the pending pods fit-existing and
// the estimator place. Making one (affinity terms parsed, requests summed)
// costs about 12 KB of allocations, and a pass places every running pod:
// 20,000 at 5,000 GPU nodes, over a second of the pass. An informer hands
// out the same object while a pod is unchanged, so the PodInfo is kept by
// pointer; a changed pod is a new object and gets a new one. The upstream
// scheduler's cache shares PodInfos across its snapshots the same way:
// nothing modifies them once made.
type PodInfos struct {
	mu   sync.Mutex
	kept map[*corev1.Pod]fwk.PodInfo
}

// NewPodInfos returns an empty cache.
func NewPodInfos() *PodInfos { return &PodInfos{} }

// Warm makes a pod's PodInfo now, for the next pass to find: an informer
// handler calls it as pods arrive, so a pass (the first after a start
// above all) does not make 20,000 of them while the user waits. A pass
// keeps only the pods it lists, so what Warm adds for pods gone or
// changed by then is dropped there.
func (c *PodInfos) Warm(pod *corev1.Pod) {
	if c == nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	if pi := newPodInfo(pod); pi != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.keep(pod, pi)
	}
}

// Of returns pod's PodInfo, kept or made now (and kept); nil when the
// scheduler cannot make one (the framework then reports the pod).
func (c *PodInfos) Of(pod *corev1.Pod) fwk.PodInfo {
	if c == nil {
		return newPodInfo(pod)
	}
	c.mu.Lock()
	pi, ok := c.kept[pod]
	c.mu.Unlock()
	if ok {
		return pi
	}
	if pi = newPodInfo(pod); pi != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.keep(pod, pi)
	}
	return pi
}

// Requests is pod's CPU (millicores) and memory (bytes) requests as the
// scheduler framework counts them, read from its PodInfo (computed when
// the PodInfo was made); ok is false when no PodInfo can be made.
func (c *PodInfos) Requests(pod *corev1.Pod) (cpu, mem int64, ok bool) {
	pi := c.Of(pod)
	if pi == nil {
		return 0, 0, false
	}
	r := pi.CalculateResource().Resource
	if r == nil {
		return 0, 0, false
	}
	return r.GetMilliCPU(), r.GetMemory(), true
}

// keep stores pi for pod. c.mu is held.
func (c *PodInfos) keep(pod *corev1.Pod, pi fwk.PodInfo) {
	if c.kept == nil {
		c.kept = map[*corev1.Pod]fwk.PodInfo{}
	}
	c.kept[pod] = pi
}

// newPodInfo is the scheduler's PodInfo of pod with its requests summed
// (cached in it, read whenever a node adds it), nil when it cannot be made.
func newPodInfo(pod *corev1.Pod) fwk.PodInfo {
	pi, err := schedframework.NewPodInfo(pod)
	if err != nil {
		return nil
	}
	pi.CalculateResource()
	return pi
}

// of returns a PodInfo for each of place whose PodInfo could be made (by
// the same index; nil for the others), made in parallel for the pods not
// kept, and keeps only the PodInfos of all's pods (the pass's pods) for
// later. A nil cache keeps nothing.
func (c *PodInfos) of(ctx context.Context, place, all []*corev1.Pod) []fwk.PodInfo {
	var kept map[*corev1.Pod]fwk.PodInfo
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		kept = c.kept
	}
	out := make([]fwk.PodInfo, len(place))
	var todo []int
	for i, p := range place {
		if pi, ok := kept[p]; ok {
			out[i] = pi
		} else {
			todo = append(todo, i)
		}
	}
	workqueue.ParallelizeUntil(ctx, runtime.GOMAXPROCS(0), len(todo), func(j int) {
		i := todo[j]
		out[i] = newPodInfo(place[i]) // nil: the snapshot makes its own and reports the error
	})
	if c != nil {
		next := make(map[*corev1.Pod]fwk.PodInfo, len(all))
		for i, p := range place {
			if out[i] != nil {
				next[p] = out[i]
			}
		}
		for _, p := range all {
			if pi, ok := kept[p]; ok {
				if _, placed := next[p]; !placed {
					next[p] = pi
				}
			}
		}
		c.kept = next
	}
	return out
}
