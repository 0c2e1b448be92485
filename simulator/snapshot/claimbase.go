package snapshot

import (
	"errors"
	"maps"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// claimBase is the claims of the last LoadResourceClaims, indexed, kept
// across Reset: the next build loads only the claims that changed into it
// and copies its indexes, instead of indexing tens of thousands of
// allocated claims again, which walks every claim's allocation and cost
// an idle pass more than anything else. It is a snapshot of its own
// holding claims only, so that it indexes them exactly as any snapshot
// does. Its ClaimWarmer also indexes claims into it as they arrive.
type claimBase struct {
	snap *Snapshot
	// loaded maps each claim's key to the object loaded for it and the
	// last load that listed it. An informer hands out a new object for
	// every change, so a claim that is the same object is the same
	// content; and the base holds the objects, so no new object can take
	// one's address meanwhile.
	loaded map[string]loadedClaim
	loads  uint64
}

type loadedClaim struct {
	claim  *resourceapi.ResourceClaim
	listed uint64
}

// ClaimWarmer indexes claims into the snapshot's claim base as they
// arrive (an informer handler calls Warm), for the next build to copy:
// the first pass after a start (or a failover) would otherwise index
// every allocated claim of the cluster while the user waits (40,000 at
// 10,000 GPU nodes: 0.16 s). A build still loads exactly the
// claims it lists (LoadResourceClaims): what Warm indexed of a claim not
// listed, or of another object than the one listed, is undone there.
// Unlike the snapshot, it is safe for concurrent use.
type ClaimWarmer struct {
	mu   sync.Mutex
	base *claimBase
}

// ClaimWarmer returns the snapshot's warmer; it stays the snapshot's
// across Reset.
func (s *Snapshot) ClaimWarmer() *ClaimWarmer { return s.warm }

// Warm indexes claim now. A claim that cannot be set is left to the
// build, which reports it.
func (w *ClaimWarmer) Warm(claim *resourceapi.ResourceClaim) {
	if w == nil || claim == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.baseFor(nil)
	key := nsKey(claim.Namespace, claim.Name)
	if l, ok := b.loaded[key]; ok && l.claim == claim {
		return
	}
	if err := b.snap.SetResourceClaim(claim); err != nil {
		return
	}
	// Marked as listed by the last load: the next one drops it unless
	// it lists it too.
	b.loaded[key] = loadedClaim{claim: claim, listed: b.loads}
}

// Forget drops a deleted claim, if the base holds that object of it.
func (w *ClaimWarmer) Forget(claim *resourceapi.ResourceClaim) {
	if w == nil || claim == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.base
	if b == nil {
		return
	}
	key := nsKey(claim.Namespace, claim.Name)
	if l, ok := b.loaded[key]; ok && l.claim == claim {
		delete(b.loaded, key)
		_ = b.snap.RemoveResourceClaim(claim.Namespace, claim.Name)
	}
}

// baseFor returns the base, made anew when there is none or when it
// honours other feature gates than user's (nil: any, as Warm cannot
// know; the next build makes it anew if they differ). w.mu must be held.
func (w *ClaimWarmer) baseFor(user *Snapshot) *claimBase {
	if w.base != nil && (user == nil || w.base.snap.gates == user.gates) {
		return w.base
	}
	logger := klog.Background()
	if user != nil {
		logger = user.logger
	}
	w.base = &claimBase{snap: New(logger), loaded: map[string]loadedClaim{}}
	if user != nil {
		w.base.snap.gates = user.gates
	}
	return w.base
}

// LoadResourceClaims sets claims into an empty snapshot (after Reset), as
// SetResourceClaim of each would, indexing only the claims changed since
// the last load or warmed since (a lookup for each of the others) and
// copying the indexes. Claims that cannot be set are left out and named in
// the error. In a snapshot holding claims, or with forks open, it is
// SetResourceClaim of each.
func (s *Snapshot) LoadResourceClaims(claims []*resourceapi.ResourceClaim) error {
	if len(s.claims) > 0 || s.j.depth() != 0 {
		var errs []error
		for _, c := range claims {
			errs = append(errs, s.SetResourceClaim(c))
		}
		return errors.Join(errs...)
	}
	w := s.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.baseFor(s)
	err := b.load(claims)
	src := b.snap
	s.claims = maps.Clone(src.claims)
	s.claimList = src.claimList.clone()
	// The owner index's sets are shared, each copied by whichever side
	// writes it first: a pass writes the claims it moves, the base those
	// that change, and copying them all was most of this copy (one set
	// per pod that owns a claim).
	s.claimsByOwner = maps.Clone(src.claimsByOwner)
	s.ownerSets, src.ownerSets = map[types.UID]bool{}, map[types.UID]bool{}
	s.alloc = src.alloc.clone()
	s.prints = maps.Clone(src.prints)
	s.dropReads()
	return err
}

// load makes the base hold claims: what SetResourceClaim of each, in
// order, would make of an empty snapshot. Claims no longer listed go.
func (b *claimBase) load(claims []*resourceapi.ResourceClaim) error {
	b.loads++
	var errs []error
	for _, c := range claims {
		if c == nil {
			errs = append(errs, b.snap.SetResourceClaim(c))
			continue
		}
		key := nsKey(c.Namespace, c.Name)
		l, ok := b.loaded[key]
		if !ok || l.claim != c {
			if err := b.snap.SetResourceClaim(c); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		b.loaded[key] = loadedClaim{claim: c, listed: b.loads}
	}
	for key, l := range b.loaded {
		if l.listed != b.loads {
			delete(b.loaded, key)
			_ = b.snap.RemoveResourceClaim(l.claim.Namespace, l.claim.Name)
		}
	}
	return errors.Join(errs...)
}

// clone copies the list for a snapshot of its own.
func (l *orderedList[T]) clone() *orderedList[T] {
	return &orderedList[T]{items: slices.Clone(l.items), keys: slices.Clone(l.keys), pos: maps.Clone(l.pos)}
}

// clone copies the index for a snapshot of its own. Capacity values are
// never modified in place, so they are shared.
func (a *allocatedIndex) clone() allocatedIndex {
	return allocatedIndex{
		dedicated:     maps.Clone(a.dedicated),
		dedicatedRefs: maps.Clone(a.dedicatedRefs),
		shared:        maps.Clone(a.shared),
		sharedRefs:    maps.Clone(a.sharedRefs),
		capacity:      maps.Clone(a.capacity),
	}
}
