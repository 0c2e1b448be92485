// Package vet names outside input the loop reads but cannot use: a pod
// annotation it cannot parse, a driver's ResourceSlice pool that is
// incomplete or contradicts itself. The loop goes on as if the input were
// absent (the allocator, too, cannot use such a pool); vet makes sure
// somebody is told, once per finding, with a Warning event on the object.
package vet

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// Event reasons.
const (
	ReasonInvalidAnnotation    = "InvalidAnnotation"
	ReasonInvalidResourceSlice = "InvalidResourceSlice"
	// ReasonMissingReference: an object names another that does not exist.
	ReasonMissingReference = "MissingReference"
)

// Finding is one input that cannot be used, and the object to tell.
type Finding struct {
	Object  runtime.Object
	Reason  string
	Message string
}

// Recorder sends a finding (a Warning event).
type Recorder func(Finding)

// Vetter remembers what it told, so that a finding is sent once while it
// lasts (and again every Repeat), and how long a pool has looked wrong:
// a driver publishes a pool's slices one by one, so a pool is reported
// only once it has stayed wrong for Grace.
type Vetter struct {
	grace, repeat time.Duration
	record        Recorder
	told          map[string]time.Time
	since         map[string]time.Time
	// pools keeps each pool's findings from the last pass, reused while
	// the pool is the same slice objects (see checkedPool).
	pools map[poolID]checkedPool
}

// checkedPool is a pool's findings and the slices they were made of. An
// informer hands out a new object for every change of a slice, so the same
// pointers are the same content; and the memo holds the slices, so no new
// object can take one's address while it is kept.
type checkedPool struct {
	slices   []*resourceapi.ResourceSlice
	findings []Finding
}

// New returns a vetter that sends its findings through record.
func New(grace, repeat time.Duration, record Recorder) *Vetter {
	return &Vetter{grace: grace, repeat: repeat, record: record, told: map[string]time.Time{}, since: map[string]time.Time{}}
}

// Run checks what the pass observed and sends what is new.
func (v *Vetter) Run(state *observe.ClusterState, now time.Time) {
	var found []Finding
	for _, p := range state.Pods {
		if _, err := reservations.ParseExpectedRuntime(p); err != nil {
			found = append(found, Finding{Object: p, Reason: ReasonInvalidAnnotation, Message: err.Error()})
		}
	}
	// What may be transient (a driver publishing, a controller creating
	// a claim) is told only once it has lasted the grace.
	seen := map[string]bool{}
	lasting := slices.Concat(v.checkPools(state.ResourceSlices), orphans(state.ResourceSlices, state.Nodes), missing(state))
	for _, f := range lasting {
		k := key(f)
		seen[k] = true
		first, ok := v.since[k]
		if !ok {
			v.since[k], first = now, now
		}
		if now.Sub(first) >= v.grace {
			found = append(found, f)
		}
	}
	for k := range v.since {
		if !seen[k] {
			delete(v.since, k)
		}
	}
	current := map[string]bool{}
	for _, f := range found {
		k := key(f)
		current[k] = true
		if at, ok := v.told[k]; ok && now.Sub(at) < v.repeat {
			continue
		}
		v.told[k] = now
		v.record(f)
	}
	for k := range v.told {
		if !current[k] {
			delete(v.told, k) // fixed, or gone: a new occurrence is news
		}
	}
}

// key names a finding: its object (by UID, so that objects of one name in
// two namespaces stay apart) and what it says.
func key(f Finding) string {
	var uid string
	if m, err := meta.Accessor(f.Object); err == nil {
		uid = string(m.GetUID())
	}
	return uid + "/" + f.Reason + "/" + f.Message
}

type poolID struct{ driver, pool string }

// Pools checks each pool's current generation as a whole: as many slices
// as resourceSliceCount says, device names unique across them, and every
// counter a device consumes present in the pool's counter sets and large
// enough. The API server checks each slice alone and cannot see these.
func Pools(slices []*resourceapi.ResourceSlice) []Finding {
	ids, pools := current(slices)
	var out []Finding
	for _, id := range ids {
		out = append(out, checkPool(id, pools[id])...)
	}
	return out
}

// checkPools is Pools with the last pass's findings kept for the pools
// whose slices did not change: an idle cluster's thousands of pools are
// not checked again every pass.
func (v *Vetter) checkPools(all []*resourceapi.ResourceSlice) []Finding {
	ids, pools := current(all)
	kept := make(map[poolID]checkedPool, len(ids))
	var out []Finding
	for _, id := range ids {
		c, ok := v.pools[id]
		if !ok || !slices.Equal(c.slices, pools[id]) {
			c = checkedPool{slices: pools[id], findings: checkPool(id, pools[id])}
		}
		kept[id] = c
		out = append(out, c.findings...)
	}
	v.pools = kept
	return out
}

// current groups the slices of each pool's current generation, each pool's
// sorted by name, and lists the pools in order.
func current(slices []*resourceapi.ResourceSlice) ([]poolID, map[poolID][]*resourceapi.ResourceSlice) {
	pools := map[poolID][]*resourceapi.ResourceSlice{}
	for _, s := range slices {
		id := poolID{s.Spec.Driver, s.Spec.Pool.Name}
		cur := pools[id]
		if len(cur) > 0 && cur[0].Spec.Pool.Generation > s.Spec.Pool.Generation {
			continue // an older generation the driver has not removed yet
		}
		if len(cur) > 0 && cur[0].Spec.Pool.Generation < s.Spec.Pool.Generation {
			cur = nil
		}
		pools[id] = append(cur, s)
	}
	ids := make([]poolID, 0, len(pools))
	for id := range pools {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].driver < ids[j].driver || ids[i].driver == ids[j].driver && ids[i].pool < ids[j].pool
	})
	for _, id := range ids {
		if p := pools[id]; len(p) > 1 {
			sort.Slice(p, func(i, j int) bool { return p[i].Name < p[j].Name })
		}
	}
	return ids, pools
}

// checkPool checks one pool's slices, sorted by name.
func checkPool(id poolID, slices []*resourceapi.ResourceSlice) []Finding {
	first := slices[0]
	var out []Finding
	add := func(s *resourceapi.ResourceSlice, format string, args ...any) {
		prefix := fmt.Sprintf("pool %q of driver %s (generation %d)", id.pool, id.driver, first.Spec.Pool.Generation)
		out = append(out, Finding{Object: s, Reason: ReasonInvalidResourceSlice, Message: prefix + ": " + fmt.Sprintf(format, args...)})
	}
	if want := first.Spec.Pool.ResourceSliceCount; int64(len(slices)) != want {
		add(first, "%d slice(s) published (%s), resourceSliceCount says %d; the scheduler cannot rely on an incomplete pool",
			len(slices), names(slices), want)
	}
	counters := map[string]map[string]resourceapi.Counter{}
	for _, s := range slices {
		for _, cs := range s.Spec.SharedCounters {
			counters[cs.Name] = cs.Counters
		}
	}
	devices := map[string]string{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if other, dup := devices[d.Name]; dup {
				add(s, "device %q is published in slices %s and %s; the pool is unusable", d.Name, other, s.Name)
				continue
			}
			devices[d.Name] = s.Name
			for _, c := range d.ConsumesCounters {
				set, ok := counters[c.CounterSet]
				if !ok {
					add(s, "device %q consumes counter set %q, which no slice of the pool has", d.Name, c.CounterSet)
					continue
				}
				for _, name := range sortedKeys(c.Counters) {
					have, ok := set[name]
					want := c.Counters[name].Value
					switch {
					case !ok:
						add(s, "device %q consumes counter %q, which counter set %q does not have", d.Name, name, c.CounterSet)
					case want.Cmp(have.Value) > 0:
						add(s, "device %q consumes %s of counter %q, but counter set %q holds %s: it can never be allocated",
							d.Name, want.String(), name, c.CounterSet, have.Value.String())
					}
				}
			}
		}
	}
	return out
}

// orphans are slices published for a node that is not there: their
// devices are nowhere (a driver's leftover, or a node name typed wrong).
func orphans(slices []*resourceapi.ResourceSlice, nodes []*corev1.Node) []Finding {
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		have[n.Name] = true
	}
	var out []Finding
	for _, s := range slices {
		if n := s.Spec.NodeName; n != nil && *n != "" && !have[*n] {
			out = append(out, Finding{Object: s, Reason: ReasonInvalidResourceSlice,
				Message: fmt.Sprintf("published for node %q, which does not exist: its devices are unusable", *n)})
		}
	}
	return out
}

func names(slices []*resourceapi.ResourceSlice) string {
	n := make([]string, len(slices))
	for i, s := range slices {
		n[i] = s.Name
	}
	return strings.Join(n, ", ")
}

func sortedKeys(m map[string]resourceapi.Counter) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
