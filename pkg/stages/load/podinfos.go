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

// PodInfos keeps the scheduler's PodInfo of each pod the snapshot places
// from one pass to the next. Making one (affinity terms parsed, requests
// summed) costs about 12 KB of allocations, and a pass places every
// running pod: 20,000 at 5,000 GPU nodes, over a second of the pass. An
// informer hands out the same object while a pod is unchanged, so the
// PodInfo is kept by pointer; a changed pod is a new object and gets a new
// one. The upstream scheduler's cache shares PodInfos across its
// snapshots the same way: nothing modifies them once made.
type PodInfos struct {
	mu   sync.Mutex
	kept map[*corev1.Pod]fwk.PodInfo
}

// NewPodInfos returns an empty cache.
func NewPodInfos() *PodInfos { return &PodInfos{} }

// Warm makes the PodInfo of a pod bound to a node now, for the next pass
// to find: an informer handler calls it as pods arrive, so a pass (the
// first after a start above all) does not make 20,000 of them while the
// user waits. A pass keeps only the pods it placed, so what Warm adds for
// pods gone or changed by then is dropped there.
func (c *PodInfos) Warm(pod *corev1.Pod) {
	if c == nil || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	pi, err := schedframework.NewPodInfo(pod)
	if err != nil {
		return
	}
	pi.CalculateResource()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kept == nil {
		c.kept = map[*corev1.Pod]fwk.PodInfo{}
	}
	c.kept[pod] = pi
}

// of returns a PodInfo for each of pods whose PodInfo could be made (by
// the same index; nil for the others), made in parallel for the pods not
// kept from the last call, and keeps only these pods' for the next call.
// A nil cache keeps nothing.
func (c *PodInfos) of(ctx context.Context, pods []*corev1.Pod) []fwk.PodInfo {
	var kept map[*corev1.Pod]fwk.PodInfo
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		kept = c.kept
	}
	out := make([]fwk.PodInfo, len(pods))
	var todo []int
	for i, p := range pods {
		if pi, ok := kept[p]; ok {
			out[i] = pi
		} else {
			todo = append(todo, i)
		}
	}
	workqueue.ParallelizeUntil(ctx, runtime.GOMAXPROCS(0), len(todo), func(j int) {
		i := todo[j]
		pi, err := schedframework.NewPodInfo(pods[i])
		if err != nil {
			return // the snapshot makes its own and reports the error
		}
		pi.CalculateResource() // cached in pi, read whenever a node adds it
		out[i] = pi
	})
	if c != nil {
		c.kept = make(map[*corev1.Pod]fwk.PodInfo, len(pods))
		for i, p := range pods {
			if out[i] != nil {
				c.kept[p] = out[i]
			}
		}
	}
	return out
}
