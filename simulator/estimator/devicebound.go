package estimator

import (
	"maps"
	"math"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// counterSlack keeps float rounding from taking a whole device off a
// bound: a bound may only be too high (one probe more), never too low.
const counterSlack = 1e-9

// sharedCounter names one counter of one counter set of one pool.
type sharedCounter struct{ driver, pool, set, name string }

// deviceBound is at most how many of slices' devices one request can hold
// at once: the number of devices, less what shared counters rule out.
// Partitions of one GPU draw on its counter set, so no more of them fit
// together than the set's capacity over the smallest draw among them
// (a whole GPU or two halves, never three). Each device is charged to one
// counter it draws on, the tightest; devices drawing on nothing, or on
// nothing their pool publishes, count one each. It is a bound, not an
// answer: the allocator's probes decide, but a bound that holds spares
// largestCount the probes past it, which on partitionable templates are
// the dear ones (see probeTimeout).
func deviceBound(sl []*resourceapi.ResourceSlice) int {
	capacity := map[sharedCounter]float64{}
	for _, s := range sl {
		for _, cs := range s.Spec.SharedCounters {
			for name, c := range cs.Counters {
				k := sharedCounter{s.Spec.Driver, s.Spec.Pool.Name, cs.Name, name}
				capacity[k] = max(capacity[k], c.Value.AsApproximateFloat64())
			}
		}
	}
	type charge struct {
		devices int
		least   float64 // the smallest draw charged to the counter
	}
	charged := map[sharedCounter]*charge{}
	bound := 0
	for _, s := range sl {
		for i := range s.Spec.Devices {
			k, draw, ok := tightest(s.Spec.Driver, s.Spec.Pool.Name, &s.Spec.Devices[i], capacity)
			if !ok {
				bound++
				continue
			}
			c := charged[k]
			if c == nil {
				c = &charge{least: draw}
				charged[k] = c
			}
			c.devices++
			c.least = min(c.least, draw)
		}
	}
	for k, c := range charged {
		bound += int(min(float64(c.devices), math.Floor(capacity[k]/c.least+counterSlack)))
	}
	return bound
}

// tightest is the counter of capacity that d draws on where the fewest
// such draws fit, and the draw; ok is false when d draws nothing from a
// counter its pool publishes. Ties go to the first counter by name, so
// that a template's bound does not depend on map order.
func tightest(driver, pool string, d *resourceapi.Device, capacity map[sharedCounter]float64) (best sharedCounter, draw float64, ok bool) {
	fewest := math.Inf(1)
	for _, use := range d.ConsumesCounters {
		for _, name := range slices.Sorted(maps.Keys(use.Counters)) {
			k := sharedCounter{driver, pool, use.CounterSet, name}
			c, published := capacity[k]
			q := use.Counters[name].Value
			v := q.AsApproximateFloat64()
			if !published || v <= 0 {
				continue
			}
			if fit := c / v; fit < fewest {
				best, draw, fewest, ok = k, v, fit, true
			}
		}
	}
	return best, draw, ok
}
