package snapshot

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocIDs memoises the device ids of an allocation's results, each an
// interned string (structured.MakeDeviceID), across Reset: an informer
// hands out the same claim, and so the same allocation, while it is
// unchanged, and every build stores every allocated claim again (20,000
// of them on an idle pass of BenchmarkLoopPass/I1). Allocations are
// never modified in place, so they are kept by pointer. Only those
// stored outside forks are kept (the build's, the plan's kept nodes):
// the simulator makes allocations by the thousand in forks it reverts,
// and would fill the memo with ones never seen again. Like sliceFacts,
// an entry no build read in keepResets resets is dropped.
type allocIDs struct {
	ids    map[*resourceapi.AllocationResult]keptIDs
	resets uint64
	// made counts the ids made rather than remembered (tests).
	made int
}

type keptIDs struct {
	ids  []structured.DeviceID
	read uint64
}

// of returns the ids of alloc's results, in order, made and remembered
// when keep says so; nil when they are neither known nor to be kept (the
// caller makes each as it goes, without a slice to hold them).
func (m *allocIDs) of(alloc *resourceapi.AllocationResult, keep bool) []structured.DeviceID {
	if k, ok := m.ids[alloc]; ok {
		if k.read != m.resets {
			k.read = m.resets
			m.ids[alloc] = k
		}
		return k.ids
	}
	if !keep {
		return nil
	}
	m.made++
	ids := make([]structured.DeviceID, len(alloc.Devices.Results))
	for i, r := range alloc.Devices.Results {
		ids[i] = structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
	}
	if m.ids == nil {
		m.ids = map[*resourceapi.AllocationResult]keptIDs{}
	}
	m.ids[alloc] = keptIDs{ids, m.resets}
	return ids
}

func (m *allocIDs) reset() {
	m.resets++
	for a, k := range m.ids {
		if m.resets-k.read > keepResets {
			delete(m.ids, a)
		}
	}
}
