package observe

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sharer is the informers' transform after dropManagedFields: the maps
// that many objects hold equal are kept once, each object pointing at the
// one copy. A workload's pods request alike, a node group's nodes have
// one capacity, a GPU model's devices consume their counters alike: in a
// cluster of thousands of GPU nodes those copies are tens of megabytes of
// a cache that lives as long as the process. An empty map becomes nil, as
// the API server's own encoding leaves it out.
//
// Sharing is safe because nothing writes an object an informer holds (the
// caches' contract; the snapshot copies what it changes). The sharer
// never writes a map it is given either: it only points fields at another
// map of equal content.
type sharer struct {
	mu       sync.Mutex
	lists    table[corev1.ResourceList]
	labels   table[map[string]string]
	counters table[map[string]resourceapi.Counter]
	capacity table[map[resourceapi.QualifiedName]resourceapi.DeviceCapacity]
	// key and names are scratch for the key being made.
	key   []byte
	names []string
}

// maxShared bounds each table: past it, the table starts again (objects
// keep what they point at; sharing goes on with the ones after).
const maxShared = 4096

// maxKey leaves maps of more content than this unshared: their keys would
// cost what they save if they are unique.
const maxKey = 1024

type table[V any] struct{ m map[string]V }

// share returns the value kept under key, keeping v if there is none.
func (t *table[V]) share(key []byte, v V) V {
	if kept, ok := t.m[string(key)]; ok {
		return kept
	}
	if t.m == nil || len(t.m) >= maxShared {
		t.m = map[string]V{}
	}
	t.m[string(key)] = v
	return v
}

// transform is the informers' transform.
func (s *sharer) transform(obj any) (any, error) {
	obj, err := dropManagedFields(obj)
	if err != nil {
		return obj, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pod(o)
	case *corev1.Node:
		s.mu.Lock()
		defer s.mu.Unlock()
		o.Status.Capacity = s.list(o.Status.Capacity)
		o.Status.Allocatable = s.list(o.Status.Allocatable)
	case *resourceapi.ResourceSlice:
		s.mu.Lock()
		defer s.mu.Unlock()
		s.slice(o)
	}
	return obj, nil
}

func (s *sharer) pod(p *corev1.Pod) {
	p.Labels = s.strings(p.Labels)
	p.Spec.NodeSelector = s.strings(p.Spec.NodeSelector)
	p.Spec.Overhead = s.list(p.Spec.Overhead)
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Requests, r.Limits = s.list(r.Requests), s.list(r.Limits)
		}
	}
	if r := p.Spec.Resources; r != nil {
		r.Requests, r.Limits = s.list(r.Requests), s.list(r.Limits)
	}
}

func (s *sharer) slice(sl *resourceapi.ResourceSlice) {
	for i := range sl.Spec.SharedCounters {
		c := &sl.Spec.SharedCounters[i]
		c.Counters = s.counterMap(c.Counters)
	}
	for i := range sl.Spec.Devices {
		d := &sl.Spec.Devices[i]
		d.Capacity = s.capacities(d.Capacity)
		for j := range d.ConsumesCounters {
			c := &d.ConsumesCounters[j]
			c.Counters = s.counterMap(c.Counters)
		}
	}
}

// sortedKeys puts m's keys in s.names, sorted, and starts s.key.
func sortedKeys[K ~string, V any](s *sharer, m map[K]V) {
	s.names, s.key = s.names[:0], s.key[:0]
	for k := range m {
		s.names = append(s.names, string(k))
	}
	slices.Sort(s.names)
}

func (s *sharer) add(parts ...string) {
	for _, p := range parts {
		s.key = append(s.key, p...)
		s.key = append(s.key, 0)
	}
}

// quantity is q's canonical string: equal strings, equal quantities.
func quantity(q resource.Quantity) string { return q.String() }

func (s *sharer) list(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	sortedKeys(s, l)
	for _, n := range s.names {
		s.add(n, quantity(l[corev1.ResourceName(n)]))
	}
	if len(s.key) > maxKey {
		return l
	}
	return s.lists.share(s.key, l)
}

func (s *sharer) strings(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	sortedKeys(s, m)
	for _, n := range s.names {
		s.add(n, m[n])
	}
	if len(s.key) > maxKey {
		return m
	}
	return s.labels.share(s.key, m)
}

func (s *sharer) counterMap(m map[string]resourceapi.Counter) map[string]resourceapi.Counter {
	if len(m) == 0 {
		return nil
	}
	sortedKeys(s, m)
	for _, n := range s.names {
		s.add(n, quantity(m[n].Value))
	}
	if len(s.key) > maxKey {
		return m
	}
	return s.counters.share(s.key, m)
}

func (s *sharer) capacities(m map[resourceapi.QualifiedName]resourceapi.DeviceCapacity) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	if len(m) == 0 {
		return nil
	}
	sortedKeys(s, m)
	for _, n := range s.names {
		c := m[resourceapi.QualifiedName(n)]
		if c.RequestPolicy != nil {
			return m // consumable capacity's policies: rare, left alone
		}
		s.add(n, quantity(c.Value))
	}
	if len(s.key) > maxKey {
		return m
	}
	return s.capacity.share(s.key, m)
}
