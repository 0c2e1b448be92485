package snapshot

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/attrreads"
)

// deviceReads is which device attributes the snapshot's device classes,
// claims and claim templates may read (attrreads). Node keys digest a
// node's slices with only those attributes (LocalDevices, SliceDigest):
// the ones no one reads, such as a GPU's uuid, would make every node of a
// real cluster unlike every other. One that a claim reads but every
// device has a value of its own of (a pod pinned to one GPU by uuid) is
// left out too (attrreads.Identities over a sample of the slices), or
// that one pod would make every key unique: the pods of
// claims that read it are not covered (CoversPod), and get no keys. The
// set is made when a key is first asked for after a build and is dropped
// when a class, claim or template that reads a name it never met is
// added; what each CEL expression reads, and the last set (when the next
// build's is equal, the digests narrowed for it are found again),
// outlive Reset.
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
		var identities map[string]bool
		if len(r.c.ClaimsOnly()) > 0 {
			identities = attrreads.Identities(s.sampleSlices())
		}
		cur := r.c.Reads(func(n string) bool { return identities[n] })
		if r.last != nil && r.last.Key() == cur.Key() {
			cur = r.last
		}
		r.cur, r.last = cur, cur
	}
	r.used = true
	return r.cur
}

// readClaim drops the set if spec (a claim's or a template's) reads what
// it was made without knowing of.
func (s *Snapshot) readClaim(spec *resourceapi.ResourceClaimSpec) {
	s.reads.dropUnless(func(c *attrreads.Collector, r *attrreads.Reads) bool { return c.Accounts(r, spec) })
}

// sampledSlices is how many of the snapshot's first node-bound slices
// sampleSlices returns.
const sampledSlices = 256

// sampleSlices are the snapshot's first node-bound slices, in its order
// (the build's: by name), where attrreads.Identities looks for the
// attributes that tell devices apart.
func (s *Snapshot) sampleSlices() []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, sl := range s.patchedSlices.items {
		if len(out) == sampledSlices {
			break
		}
		if sl != nil && sl.Spec.NodeName != nil {
			out = append(out, sl)
		}
	}
	return out
}

// CoversPod reports whether the device attributes node keys digest
// cover everything pod's claims read (their classes' reads always are):
// a pod whose claim reads an attribute left out (an identity) may
// fit one node and not another of one key. Claims not in the snapshot
// (no claim, no template) leave pod fitting nowhere, alike everywhere.
func (s *Snapshot) CoversPod(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) == 0 {
		return true
	}
	reads := s.attrReads()
	if !reads.Partial() {
		return true // no claim reads what keys leave out
	}
	r := s.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pc := range pod.Spec.ResourceClaims {
		var specs []*resourceapi.ResourceClaimSpec
		if pc.ResourceClaimName != nil {
			if c := s.claims[nsKey(pod.Namespace, *pc.ResourceClaimName)]; c != nil {
				specs = append(specs, &c.Spec)
			}
		}
		if pc.ResourceClaimTemplateName != nil {
			if t := s.templates[nsKey(pod.Namespace, *pc.ResourceClaimTemplateName)]; t != nil {
				specs = append(specs, &t.Spec.Spec)
			}
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name != pc.Name || st.ResourceClaimName == nil {
					continue
				}
				if c := s.claims[nsKey(pod.Namespace, *st.ResourceClaimName)]; c != nil {
					specs = append(specs, &c.Spec)
				}
			}
		}
		for _, spec := range specs {
			if !r.c.Covers(reads, spec) {
				return false
			}
		}
	}
	return true
}

// readClass is readClaim for a device class.
func (s *Snapshot) readClass(class *resourceapi.DeviceClass) {
	s.reads.dropUnless(func(c *attrreads.Collector, r *attrreads.Reads) bool { return c.CoversClass(r, class) })
}

// dropUnless drops the set made, if any, unless it knew of what ok checks.
func (r *deviceReads) dropUnless(ok func(*attrreads.Collector, *attrreads.Reads) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil && !ok(&r.c, r.cur) {
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
