package snapshot

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
)

// deviceReads is which device attributes the snapshot's device classes,
// claims and claim templates may read (attrreads). Node keys digest a
// node's slices with only those attributes (LocalDevices, SliceDigest):
// the ones no one reads, such as a GPU's uuid, would make every node of a
// real cluster unlike every other. The set is made when a key is first
// asked for after a build and is dropped when a class, claim or template
// that reads more is added; what each CEL expression reads, and the last
// set (when the next build's is equal, the digests narrowed for it are
// found again), outlive Reset.
type deviceReads struct {
	// mu: keys, reads, may be asked for on several goroutines at once.
	mu   sync.Mutex
	c    attrreads.Collector
	cur  *attrreads.Reads // nil: made when asked for
	last *attrreads.Reads
	// used: a key was made with cur.
	used bool
	// dropped counts the sets dropped after keys were made with them.
	// NodeGen's Shared part carries it, so that nothing cached by a Gen
	// read under a narrower set is used again; it never rewinds.
	dropped uint64
}

// readsShift puts deviceReads.dropped above any generation the counter
// reaches (2⁴⁸ changes).
const readsShift = 48

// attrReads is the set the snapshot's objects read, made if need be.
func (s *Snapshot) attrReads() *attrreads.Reads {
	r := s.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		r.c.Reset()
		for _, c := range s.classes {
			r.c.Class(c)
		}
		for _, t := range s.templates {
			r.c.ClaimSpec(&t.Spec.Spec)
		}
		for _, c := range s.claims {
			r.c.ClaimSpec(&c.Spec)
		}
		cur := r.c.Reads()
		if r.last != nil && r.last.Key() == cur.Key() {
			cur = r.last
		}
		r.cur, r.last = cur, cur
	}
	r.used = true
	return r.cur
}

// readClaim drops the set if spec (a claim's or a template's) reads what
// it does not hold.
func (s *Snapshot) readClaim(spec *resourceapi.ResourceClaimSpec) {
	r := s.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && !r.c.Covers(r.cur, spec) {
		r.drop()
	}
}

// readClass is readClaim for a device class.
func (s *Snapshot) readClass(class *resourceapi.DeviceClass) {
	r := s.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && !r.c.CoversClass(r.cur, class) {
		r.drop()
	}
}

// dropReads drops the set: claims were replaced wholesale.
func (s *Snapshot) dropReads() {
	r := s.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop()
}

// lastSet is the set the last build made, nil before any.
func (r *deviceReads) lastSet() *attrreads.Reads {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func (r *deviceReads) drop() {
	if r.used {
		r.dropped++
	}
	r.cur, r.used = nil, false
}

// reset starts a build: its set is made anew (Reset gives every node a
// new Gen anyway).
func (r *deviceReads) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur, r.used = nil, false
}
