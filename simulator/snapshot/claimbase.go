package snapshot

import (
	"errors"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// claimBase is the claims of the last LoadResourceClaims, indexed, kept
// across Reset: the next build loads only the claims that changed into it
// and copies its indexes, instead of indexing tens of thousands of
// allocated claims again, which walks every claim's allocation and cost
// an idle pass more than anything else. It is a snapshot of its own
// holding claims only, so that it indexes them exactly as any snapshot
// does.
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

// LoadResourceClaims sets claims into an empty snapshot (after Reset), as
// SetResourceClaim of each would, indexing only the claims changed since
// the last load (a lookup for each of the others) and copying the indexes. Claims that cannot be set are left out and
// named in the error. In a snapshot holding claims, or with forks open,
// it is SetResourceClaim of each.
func (s *Snapshot) LoadResourceClaims(claims []*resourceapi.ResourceClaim) error {
	if len(s.claims) > 0 || s.j.depth() != 0 {
		var errs []error
		for _, c := range claims {
			errs = append(errs, s.SetResourceClaim(c))
		}
		return errors.Join(errs...)
	}
	b := s.claimBase
	if b == nil || b.snap.gates != s.gates {
		b = &claimBase{snap: New(s.logger), loaded: map[string]loadedClaim{}}
		b.snap.gates = s.gates
		s.claimBase = b
	}
	err := b.load(claims)
	src := b.snap
	s.claims = maps.Clone(src.claims)
	s.claimList = src.claimList.clone()
	s.claimsByOwner = make(map[types.UID]sets.Set[string], len(src.claimsByOwner))
	for uid, keys := range src.claimsByOwner {
		s.claimsByOwner[uid] = maps.Clone(keys)
	}
	s.alloc = src.alloc.clone()
	s.prints = maps.Clone(src.prints)
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
