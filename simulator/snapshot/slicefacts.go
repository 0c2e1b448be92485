package snapshot

import (
	"crypto/sha256"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
)

// sliceFacts memoises what LocalDevices reads of a slice: its digest
// (baseDigest, and narrowDigest for the last set of attribute readers)
// and its devices' ids, which cost a protobuf encoding and an interned
// string per device to make, for every node key made again after a
// placement. Slices are never modified in place, so they are kept by
// pointer, and across Reset for the slices the next builds add again (an
// informer hands out the same object while a slice is unchanged): a fact
// no build read since the last keepResets resets is dropped. Slices new
// to a build take the facts their SliceWarmer made as they arrived.
type sliceFacts struct {
	// mu: LocalDevices, a read, may run on several goroutines at once
	// (estimator.NodeKeys.OfAll), and reading a fact records it read.
	mu    sync.Mutex
	facts map[*resourceapi.ResourceSlice]keptFact
	// resets counts Reset calls: the age of a fact is how many ago it
	// was last read.
	resets  uint64
	arrived *SliceWarmer
	// made counts the facts made here rather than taken (tests).
	made int
}

// keepResets is how many resets a fact outlives unread. A pass resets
// twice (load.Prepare before the templates are made, load.Build after),
// and the first of its builds reads only the templates' slices: keeping
// only what the build just before read dropped the nodes' facts every
// pass, and every pass made them again.
const keepResets = 2

type keptFact struct {
	sliceFact
	read   uint64
	narrow narrowed
}

// narrowed is the digest of a slice as one set of attribute readers sees
// it.
type narrowed struct {
	reads  *attrreads.Reads
	digest [sha256.Size]byte
}

type sliceFact struct {
	// digest is baseDigest's.
	digest [sha256.Size]byte
	ids    []structured.DeviceID
	// shared: a device may be shared between claims, whose shares and
	// consumed capacity LocalDevices does not describe.
	shared bool
}

// of returns slice's facts, with the digest of it that reads sees
// (narrowDigest; reads nil: the base digest); ok is false when the slice
// cannot be digested.
func (m *sliceFacts) of(slice *resourceapi.ResourceSlice, node string, reads *attrreads.Reads) (sliceFact, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kf, found := m.facts[slice]
	changed := !found || kf.read != m.resets
	if !found {
		f, ok := m.arrived.take(slice, node)
		if !ok {
			if f.sliceFact, ok = makeFact(slice, node); !ok {
				return sliceFact{}, false
			}
			m.made++
		}
		kf.sliceFact, kf.narrow = f.sliceFact, f.narrow
	}
	kf.read = m.resets
	if reads != nil && kf.narrow.reads != reads {
		// Hashed unlocked: keys of thousands of nodes are made on every
		// core, and a slice's digest is the same whoever makes it.
		m.mu.Unlock()
		d := narrowDigest(kf.digest, slice.Spec.Devices, reads)
		m.mu.Lock()
		kf.narrow, changed = narrowed{reads: reads, digest: d}, true
	}
	if changed {
		if m.facts == nil {
			m.facts = map[*resourceapi.ResourceSlice]keptFact{}
		}
		m.facts[slice] = kf
	}
	f := kf.sliceFact
	if reads != nil {
		f.digest = kf.narrow.digest
	}
	return f, true
}

// reset starts a new build: facts read within the last keepResets
// resets are kept for it.
func (m *sliceFacts) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets++
	for slice, f := range m.facts {
		if m.resets-f.read > keepResets {
			delete(m.facts, slice)
		}
	}
}

func makeFact(slice *resourceapi.ResourceSlice, node string) (f sliceFact, ok bool) {
	if f.digest, ok = baseDigest(slice, node); !ok {
		return sliceFact{}, false
	}
	f.shared = slices.ContainsFunc(slice.Spec.Devices, func(d resourceapi.Device) bool {
		return ptr.Deref(d.AllowMultipleAllocations, false)
	})
	f.ids = SliceDeviceIDs(slice)
	return f, true
}

// SliceWarmer makes the facts of node-bound slices as they arrive (an
// informer handler calls Warm), for the next build that adds them: the
// first pass after a start would otherwise encode every slice of 5,000
// nodes while the user waits. A build takes what it uses; Forget drops
// slices replaced or deleted before any build used them. Unlike the
// snapshot, it is safe for concurrent use.
type SliceWarmer struct {
	mu sync.Mutex
	// facts are by slice name: a deleted slice comes back from a watch as
	// another object than the one that arrived.
	facts map[string]warmFact
	// reads is the snapshot's: slices are digested for its last set,
	// which the next build's mostly is.
	reads *deviceReads
}

type warmFact struct {
	slice *resourceapi.ResourceSlice
	fact  keptFact
}

// SliceWarmer returns the snapshot's warmer; it stays the snapshot's
// across Reset.
func (s *Snapshot) SliceWarmer() *SliceWarmer { return s.facts.arrived }

// Warm makes slice's facts now. Slices bound to no node are left alone:
// LocalDevices never reads them.
func (w *SliceWarmer) Warm(slice *resourceapi.ResourceSlice) {
	if w == nil || slice.Spec.NodeName == nil {
		return
	}
	f, ok := makeFact(slice, *slice.Spec.NodeName)
	if !ok {
		return
	}
	kf := keptFact{sliceFact: f}
	if last := w.reads.lastSet(); last != nil {
		kf.narrow = narrowed{reads: last, digest: narrowDigest(f.digest, slice.Spec.Devices, last)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.facts == nil {
		w.facts = map[string]warmFact{}
	}
	w.facts[slice.Name] = warmFact{slice, kf}
}

// Forget drops what Warm made of the slice of that name.
func (w *SliceWarmer) Forget(slice *resourceapi.ResourceSlice) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.facts, slice.Name)
}

// take hands slice's facts, made for node, to a build, which keeps them
// from then on.
func (w *SliceWarmer) take(slice *resourceapi.ResourceSlice, node string) (keptFact, bool) {
	if w == nil || ptr.Deref(slice.Spec.NodeName, "") != node {
		return keptFact{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f, ok := w.facts[slice.Name]
	if !ok || f.slice != slice {
		return keptFact{}, false
	}
	delete(w.facts, slice.Name)
	return f.fact, true
}
