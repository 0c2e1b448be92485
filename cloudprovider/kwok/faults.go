package kwok

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// ErrInjectedFailure is wrapped by IncreaseSize and AtomicIncreaseSize when
// faults.failureRate fails instances at request, and by Nodes() and
// TargetSize() when their error rates strike.
var ErrInjectedFailure = errors.New("InjectedFailure")

// instanceFaults are the faults decided for one instance when it is
// requested. They are recorded with it (and in its state ConfigMap), so
// that a restarted provider goes on failing it the same way.
type instanceFaults struct {
	NeverRegister       bool `json:"neverRegister,omitempty"`
	NeverReady          bool `json:"neverReady,omitempty"`
	DriversNeverPublish bool `json:"driversNeverPublish,omitempty"`
	IncompletePool      bool `json:"incompletePool,omitempty"`
}

// groupRand holds a group's random sources, one per kind of draw, so that
// how often the autoscaler polls Nodes() does not change which instances
// fail. Guarded by p.mu.
type groupRand struct {
	failures, nodes, targetSize *rand.Rand
}

// newGroupRand seeds the sources from the configured seed and the group's
// name: the same seed gives each group its own, repeatable sequences.
func newGroupRand(seed int64, group string) groupRand {
	src := func(stream string) *rand.Rand {
		h := fnv.New64a()
		_, _ = h.Write([]byte(group + "/" + stream))
		return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	}
	return groupRand{failures: src("failures"), nodes: src("nodes"), targetSize: src("targetSize")}
}

// strikes draws whether an event of probability rate happens. A zero rate
// draws nothing, so that a knob left unset leaves the sequences alone.
func strikes(r *rand.Rand, rate float64) bool {
	return rate > 0 && r.Float64() < rate
}

func (g *NodeGroupConfig) failureMode() FailureMode {
	if g.Faults.FailureMode == "" {
		return FailAtRequest
	}
	return g.Faults.FailureMode
}

// drawFailuresLocked draws faults.failureRate for n new instances, in
// request order.
func (g *nodeGroup) drawFailuresLocked(n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = strikes(g.rand.failures, g.cfg.Faults.FailureRate)
	}
	return out
}

// faultsFor decides the faults of the index-th live instance (0-based);
// struck says whether faults.failureRate hit it with a mode that strikes
// after the request.
func (g *nodeGroup) faultsFor(index int, struck bool) instanceFaults {
	f := g.cfg.Faults
	beyond := func(n *int) bool { return n != nil && index >= *n }
	out := instanceFaults{
		NeverRegister:       f.NeverRegister || beyond(f.NeverRegisterAfter),
		NeverReady:          f.NeverReady || beyond(f.NeverReadyAfter),
		DriversNeverPublish: f.DriversNeverPublish,
		IncompletePool:      f.IncompletePool,
	}
	if struck {
		switch g.cfg.failureMode() {
		case FailNeverRegister:
			out.NeverRegister = true
		case FailNeverReady:
			out.NeverReady = true
		}
	}
	return out
}

func injectedFailureInfo(group string, rate float64) *cloudprovider.InstanceErrorInfo {
	return &cloudprovider.InstanceErrorInfo{
		ErrorClass:   cloudprovider.OtherErrorClass,
		ErrorCode:    "InjectedFailure",
		ErrorMessage: fmt.Sprintf("injected fault: node group %s fails %g of its creations (faults.failureRate)", group, rate),
	}
}

// apiErrorLocked draws a cloud API hiccup for a call of Nodes() or
// TargetSize().
func (g *nodeGroup) apiErrorLocked(call string, r *rand.Rand, rate float64) error {
	if !strikes(r, rate) {
		return nil
	}
	return fmt.Errorf("node group %s: %s: injected cloud API error: %w", g.cfg.Name, call, ErrInjectedFailure)
}
