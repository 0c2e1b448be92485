package fragmentation

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/parallel"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Shape is a request shape: the device claims one pod asks for, by
// content. Two pods with the same shape ask the allocator the same.
type Shape struct {
	Key    string
	Claims []resourceapi.ResourceClaimSpec
	// size orders shapes largest first where a greedy choice is made:
	// the devices the claims' first choices ask for.
	size int64
}

// NewShape makes a shape from claim specs, defaulted as the API would.
func NewShape(specs ...resourceapi.ResourceClaimSpec) *Shape {
	sh := &Shape{}
	for i := range specs {
		spec := framework.DefaultedSpec(&resourceapi.ResourceClaim{Spec: specs[i]})
		sh.Claims = append(sh.Claims, spec)
		for _, r := range spec.Devices.Requests {
			switch {
			case r.Exactly != nil && r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeAll:
				sh.size += 1 << 20
			case r.Exactly != nil:
				sh.size += r.Exactly.Count
			case len(r.FirstAvailable) > 0:
				sh.size += max(r.FirstAvailable[0].Count, 1)
			}
		}
	}
	h := fnv.New128a()
	_ = json.NewEncoder(h).Encode(sh.Claims)
	sh.Key = fmt.Sprintf("%x", h.Sum(nil))[:16]
	return sh
}

// ShapeOf returns the shape of a pod's claims as the snapshot resolves
// them: an existing claim by its spec, a claim the controller has not
// made yet by its template's. Claims allocated already take nothing new
// and are left out unless includeAllocated (a running pod's shape is
// still a shape the cluster asks for). ok is false when nothing is left.
func ShapeOf(snap *snapshot.Snapshot, pod *v1.Pod, includeAllocated bool) (*Shape, bool) {
	specs := claimSpecs(snap, pod, includeAllocated)
	if len(specs) == 0 {
		return nil, false
	}
	return NewShape(specs...), true
}

// claimSpecs are the specs ShapeOf makes pod's shape of.
func claimSpecs(snap *snapshot.Snapshot, pod *v1.Pod, includeAllocated bool) []resourceapi.ResourceClaimSpec {
	var specs []resourceapi.ResourceClaimSpec
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if framework.ClaimNotMadeYet(pod, pc) {
			if t, ok := snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName); ok {
				specs = append(specs, t.Spec.Spec)
			}
			continue
		}
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil || name == nil {
			continue
		}
		c, ok := snap.ResourceClaim(pod.Namespace, *name)
		if !ok || (c.Status.Allocation != nil && !includeAllocated) {
			continue
		}
		specs = append(specs, c.Spec)
	}
	return specs
}

// Shapes remembers the request shapes seen recently: those of pending pods
// and of running ones, each until retention has passed since it was last
// seen. It is safe for concurrent use (the loop writes it, an expander
// reads it).
type Shapes struct {
	retention time.Duration
	mu        sync.Mutex
	seen      map[string]seenShape
	// byPod caches each pod's shape with the claim objects it was made
	// from: snapshot objects are replaced, never modified, so the same
	// pointers mean the same shape, and hashing specs again for every
	// running pod on every pass is the cost that would grow with the
	// cluster.
	byPod map[types.UID]podShape
	// observed counts the calls of Observe: an entry of byPod not seen
	// by the last one is dropped (kept in place, a new map every pass
	// cost a quarter of Observe at 60,000 pods).
	observed uint64
	// byContent keeps shapes by a digest of their specs' protobuf
	// encoding (contentDigest):
	// running pods each have a claim of their own, mostly with equal
	// specs, and encoding one costs a tenth of defaulting it and hashing
	// it as JSON (NewShape).
	byContent map[contentDigest]*Shape
}

type podShape struct {
	from  []any
	shape *Shape
	// observed is the Observe call that saw the pod last.
	observed uint64
}

type seenShape struct {
	shape *Shape
	last  time.Time
}

// NewShapes returns an empty registry keeping shapes for retention.
func NewShapes(retention time.Duration) *Shapes {
	return &Shapes{retention: retention, seen: map[string]seenShape{}, byPod: map[types.UID]podShape{}, byContent: map[contentDigest]*Shape{}}
}

// minParallelPods is how many pods Observe reads per goroutine at least.
const minParallelPods = 1024

// podRead is what Observe read of one pod, side by side with the others.
type podRead struct {
	from []any
	// kept is the pod's shape when its claim objects are those it was
	// made from (hit) or when a shape of its specs' content is kept
	// already; otherwise specs and key (appendContentKey) describe it.
	kept  *Shape
	hit   bool
	specs []resourceapi.ResourceClaimSpec
	key   contentDigest
	err   error
}

// Observe records the shapes of pods at now. What a pod's shape is made
// of is read from the snapshot on several goroutines (reads only: 60,000
// pods at the largest benchmark), then recorded in order.
func (s *Shapes) Observe(snap *snapshot.Snapshot, pods []*v1.Pod, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observed++
	if len(s.byPod) == 0 {
		s.byPod = make(map[types.UID]podShape, len(pods)) // sized once, not grown pod by pod
	}
	var claiming []*v1.Pod
	for _, p := range pods {
		// A pod whose claims read what node keys leave out (a GPU by
		// its uuid) would fit one node and not another of one state:
		// its shape is not measured.
		if len(p.Spec.ResourceClaims) > 0 && snap.CoversPod(p) {
			claiming = append(claiming, p)
		}
	}
	read := make([]podRead, len(claiming))
	parallel.Each(len(claiming), minParallelPods, func(i int) {
		p, o := claiming[i], &read[i]
		o.from = claimObjects(snap, p)
		if c, ok := s.byPod[p.UID]; ok && slices.Equal(c.from, o.from) {
			o.kept, o.hit = c.shape, true
			return
		}
		o.specs = claimSpecs(snap, p, true)
		// Encoded into a scratch buffer and kept as a digest: a pass
		// reads thousands of pods, and their keys were most of what
		// Observe allocated. Most specs are of a shape kept already,
		// looked up here (byContent is only read while the goroutines
		// run).
		scratch := keyScratch.Get().(*[]byte)
		*scratch, o.err = appendContentKey((*scratch)[:0], o.specs)
		o.key = digestOf(*scratch)
		keyScratch.Put(scratch)
		if sh, ok := s.byContent[o.key]; ok && o.err == nil {
			o.kept, o.specs = sh, nil
		}
	})
	for i, p := range claiming {
		o := &read[i]
		c := podShape{from: o.from, shape: o.kept}
		if !o.hit && o.kept == nil {
			c.shape = s.shapeOf(o.specs, o.key, o.err)
		}
		c.observed = s.observed
		s.byPod[p.UID] = c
		if c.shape != nil {
			s.seen[c.shape.Key] = seenShape{shape: c.shape, last: now}
		}
	}
	maps.DeleteFunc(s.byPod, func(_ types.UID, c podShape) bool { return c.observed != s.observed })
}

// appendContentKey appends to key the protobuf encoding of specs, each
// preceded by its length: shapes are kept by it (byContent).
func appendContentKey(key []byte, specs []resourceapi.ResourceClaimSpec) ([]byte, error) {
	for i := range specs {
		n := specs[i].Size()
		key = binary.AppendUvarint(key, uint64(n))
		start := len(key)
		key = slices.Grow(key, n)[:start+n]
		if _, err := specs[i].MarshalToSizedBuffer(key[start:]); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// keyScratch holds Observe's scratch keys, one per goroutine at a time.
var keyScratch = sync.Pool{New: func() any { return new([]byte) }}

// contentDigest is 128 bits of a content key, hashed with per-process
// seeds (the digests are compared within the process only).
type contentDigest [2]uint64

var contentSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func digestOf(key []byte) contentDigest {
	return contentDigest{maphash.Bytes(contentSeeds[0], key), maphash.Bytes(contentSeeds[1], key)}
}

// shapeOf is NewShape(specs...), nil for no specs, kept by content (key,
// the digest of appendContentKey's; err, its error, keeps nothing).
func (s *Shapes) shapeOf(specs []resourceapi.ResourceClaimSpec, key contentDigest, err error) *Shape {
	if len(specs) == 0 {
		return nil
	}
	if err != nil {
		return NewShape(specs...)
	}
	if sh, ok := s.byContent[key]; ok {
		return sh
	}
	if len(s.byContent) >= maxMemo {
		s.byContent = map[contentDigest]*Shape{}
	}
	sh := NewShape(specs...)
	s.byContent[key] = sh
	return sh
}

// claimObjects lists the snapshot objects a pod's shape is made from.
func claimObjects(snap *snapshot.Snapshot, pod *v1.Pod) []any {
	out := make([]any, 0, len(pod.Spec.ResourceClaims))
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		if framework.ClaimNotMadeYet(pod, pc) {
			t, _ := snap.ResourceClaimTemplate(pod.Namespace, *pc.ResourceClaimTemplateName)
			out = append(out, t)
			continue
		}
		var c *resourceapi.ResourceClaim
		if name, _, err := resourceclaim.Name(pod, pc); err == nil && name != nil {
			c, _ = snap.ResourceClaim(pod.Namespace, *name)
		}
		out = append(out, c)
	}
	return out
}

// Active returns the shapes seen within the retention before now, largest
// first, forgetting older ones.
func (s *Shapes) Active(now time.Time) []*Shape {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Shape
	for k, e := range s.seen {
		if now.Sub(e.last) > s.retention {
			delete(s.seen, k)
			continue
		}
		out = append(out, e.shape)
	}
	SortShapes(out)
	return out
}

// SortShapes orders shapes largest first, then by key.
func SortShapes(shapes []*Shape) {
	slices.SortFunc(shapes, func(a, b *Shape) int {
		return cmp.Or(cmp.Compare(b.size, a.size), cmp.Compare(a.Key, b.Key))
	})
}

// shapesKey identifies a set of shapes.
func shapesKey(shapes []*Shape) string {
	h := fnv.New64a()
	for _, s := range shapes {
		_, _ = h.Write([]byte(s.Key))
	}
	return fmt.Sprintf("%x", h.Sum64())
}
