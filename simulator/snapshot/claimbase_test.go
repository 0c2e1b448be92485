package snapshot

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// LoadResourceClaims, which loads only what changed since the last build,
// leaves the snapshot as setting every claim into a new one would: over
// random builds where claims stay, go, come back, are replaced (other
// devices, owners, pinned to no node, admin access, shared) or are listed
// twice, where the pass in between changed the snapshot's claims, and
// where the ClaimWarmer indexed, before the build, claims it lists,
// versions it does not list and deletions.
func TestLoadResourceClaimsAsFresh(t *testing.T) {
	const driver = "gpu.example.com"
	rng := rand.New(rand.NewPCG(1, 2))
	version := 0
	claim := func(key int) *resourceapi.ResourceClaim {
		version++
		node := fmt.Sprintf("n%d", rng.IntN(3))
		var results []resourceapi.DeviceRequestAllocationResult
		for range rng.IntN(3) {
			r := builder.AllocatedDevice("gpu", driver, node, fmt.Sprintf("gpu-%d", rng.IntN(4)))
			switch rng.IntN(6) {
			case 0:
				r.AdminAccess = ptr.To(true)
			case 1:
				r.ShareID = ptr.To(types.UID(fmt.Sprintf("share-%d", rng.IntN(2))))
			}
			results = append(results, r)
		}
		c := builder.Claim("ns", fmt.Sprintf("c%d", key)).Request(builder.Request("gpu", "gpu")).Allocated(node, results...).Obj()
		c.ResourceVersion = fmt.Sprint(version)
		switch rng.IntN(4) {
		case 0:
			c.Status.Allocation = nil
		case 1:
			c.Status.Allocation.NodeSelector = nil
		}
		if rng.IntN(2) == 0 {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", Controller: ptr.To(true),
				UID: types.UID(fmt.Sprintf("owner-%d", rng.IntN(5)))}}
		}
		return c
	}
	current := map[int]*resourceapi.ResourceClaim{}
	s := newTestSnapshot(t)
	for step := range 200 {
		for key := range 12 {
			switch rng.IntN(5) {
			case 0:
				delete(current, key)
			case 1:
				current[key] = claim(key)
			}
		}
		list := slices.Collect(maps.Values(current))
		if len(list) > 0 && rng.IntN(8) == 0 {
			list = append(list, list[rng.IntN(len(list))]) // listed twice
		}
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		w := s.ClaimWarmer()
		for key := range 12 {
			switch rng.IntN(6) {
			case 0:
				if c, ok := current[key]; ok {
					w.Warm(c) // arrived, then listed
				}
			case 1:
				w.Warm(claim(key)) // a version the build does not list
			case 2:
				if c, ok := current[key]; ok {
					w.Forget(c) // deleted, yet listed (the list is older)
				}
			}
		}

		mustOK(t, s.Reset())
		if err := s.LoadResourceClaims(list); err != nil {
			t.Fatal(err)
		}
		fresh := newTestSnapshot(t)
		for _, c := range list {
			mustOK(t, fresh.SetResourceClaim(c))
		}
		if diff := claimsDiff(s, fresh); diff != "" {
			t.Fatalf("step %d: loaded differs from fresh: %s", step, diff)
		}
		// The base and the snapshot share index sets: claims warmed into
		// the base now, and claims the pass writes in a fork it reverts,
		// leave the snapshot as loaded.
		for key := range 12 {
			if rng.IntN(3) == 0 {
				w.Warm(claim(key))
			}
		}
		s.Fork()
		for key := range 12 {
			if rng.IntN(2) == 0 {
				mustOK(t, s.SetResourceClaim(claim(key)))
			}
		}
		mustOK(t, s.Revert())
		if diff := claimsDiff(s, fresh); diff != "" {
			t.Fatalf("step %d: after warming the base and reverting a fork: %s", step, diff)
		}
		// The pass changes its snapshot; the next build must not see it.
		for key := range 3 {
			if rng.IntN(2) == 0 {
				_ = s.RemoveResourceClaim("ns", fmt.Sprintf("c%d", key))
			} else {
				mustOK(t, s.SetResourceClaim(claim(key)))
			}
		}
	}
}

// Warm runs on an informer's goroutine while passes build: the race
// detector (make test runs this package with it) sees their accesses,
// and every build is still as fresh.
func TestClaimWarmerConcurrentWithBuilds(t *testing.T) {
	const driver = "gpu.example.com"
	claims := make([]*resourceapi.ResourceClaim, 200)
	for i := range claims {
		node := fmt.Sprintf("n%d", i%4)
		claims[i] = builder.Claim("ns", fmt.Sprintf("c%d", i)).Request(builder.Request("gpu", "gpu")).
			Allocated(node, builder.AllocatedDevice("gpu", driver, node, fmt.Sprintf("gpu-%d", i/4))).Obj()
		// Owned, so that the warmer writes owner-index sets the builds
		// share with it.
		claims[i].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", Controller: ptr.To(true),
			UID: types.UID(fmt.Sprintf("owner-%d", i%5))}}
	}
	s := newTestSnapshot(t)
	w := s.ClaimWarmer()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, c := range claims {
			w.Warm(c)
			if i%3 == 0 {
				w.Forget(c)
			}
		}
	}()
	fresh := newTestSnapshot(t)
	for _, c := range claims {
		mustOK(t, fresh.SetResourceClaim(c))
	}
	for range 20 {
		mustOK(t, s.Reset())
		if err := s.LoadResourceClaims(claims); err != nil {
			t.Fatal(err)
		}
		if diff := claimsDiff(s, fresh); diff != "" {
			t.Fatalf("loaded differs from fresh: %s", diff)
		}
	}
	<-done
}

// claimsDiff compares what the snapshots' readers see of their claims.
func claimsDiff(got, want *Snapshot) string {
	if !maps.Equal(got.claims, want.claims) {
		return fmt.Sprintf("claims %v, want %v", slices.Sorted(maps.Keys(got.claims)), slices.Sorted(maps.Keys(want.claims)))
	}
	gl, _ := got.ResourceClaims().List()
	wl, _ := want.ResourceClaims().List()
	if len(gl) != len(wl) || len(gl) != len(got.claims) {
		return fmt.Sprintf("listed %d claims, want %d", len(gl), len(wl))
	}
	for _, c := range gl {
		if got.claims[nsKey(c.Namespace, c.Name)] != c {
			return fmt.Sprintf("listed %s/%s is not the stored claim", c.Namespace, c.Name)
		}
	}
	for i := range 5 {
		uid := types.UID(fmt.Sprintf("owner-%d", i))
		if g, w := got.ClaimsOwnedBy(uid), want.ClaimsOwnedBy(uid); !slices.Equal(g, w) {
			return fmt.Sprintf("owned by %s: %d claims, want %d", uid, len(g), len(w))
		}
	}
	ga, wa := got.alloc, want.alloc
	switch {
	case !maps.Equal(ga.dedicated, wa.dedicated) || !maps.Equal(ga.dedicatedRefs, wa.dedicatedRefs):
		return fmt.Sprintf("dedicated %v, want %v", ga.dedicatedRefs, wa.dedicatedRefs)
	case !maps.Equal(ga.shared, wa.shared) || !maps.Equal(ga.sharedRefs, wa.sharedRefs):
		return fmt.Sprintf("shared %v, want %v", ga.sharedRefs, wa.sharedRefs)
	case len(ga.capacity) != len(wa.capacity):
		return fmt.Sprintf("capacity of %d devices, want %d", len(ga.capacity), len(wa.capacity))
	}
	// Prints of nothing allocated may be left as zero entries.
	for _, node := range []string{"", "n0", "n1", "n2"} {
		if got.prints[node] != want.prints[node] {
			return fmt.Sprintf("print of %q %v, want %v", node, got.prints[node], want.prints[node])
		}
	}
	return ""
}

// A snapshot that holds claims already, or has forks open, takes each
// claim as SetResourceClaim does.
func TestLoadResourceClaimsIntoUsedSnapshot(t *testing.T) {
	s := newTestSnapshot(t)
	a, b := builder.Claim("ns", "a").Obj(), builder.Claim("ns", "b").Obj()
	mustOK(t, s.SetResourceClaim(a))
	mustOK(t, s.LoadResourceClaims([]*resourceapi.ResourceClaim{b}))
	if len(s.claims) != 2 {
		t.Errorf("claims %v, want a and b", slices.Sorted(maps.Keys(s.claims)))
	}
	if err := s.LoadResourceClaims([]*resourceapi.ResourceClaim{builder.Claim("ns", "").Obj()}); err == nil {
		t.Error("a claim without a name was loaded without an error")
	}
}

// Reserve sizes an empty snapshot and leaves one that holds anything as it
// was; the shared part's Gen set by Reset stays.
func TestReserve(t *testing.T) {
	s := newTestSnapshot(t)
	mustOK(t, s.Reset())
	shared := s.NodeGen("n1").Shared
	s.Reserve(10, 100, 10)
	if s.NodeGen("n1").Shared != shared {
		t.Error("Reserve lost the shared part's generation")
	}
	mustOK(t, s.AddNode(builder.Node("n1").Obj()))
	s.Reserve(10, 100, 10)
	if _, err := s.Get("n1"); err != nil {
		t.Errorf("Reserve dropped a node: %v", err)
	}
}
