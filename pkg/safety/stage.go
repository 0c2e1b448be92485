package safety

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// StageName is the name of the stage that opens the gate.
const StageName = "safetyGate"

// Stage opens the gate for the pass, with its health and groups, before
// any stage that destroys asks it. inFlight (nil: none) counts the
// removals earlier passes started that are still under way.
func (g *Gate) Stage(inFlight func() int) pass.Stage {
	return pass.Func{ID: StageName, In: pass.Keys(observe.Unsafe, nodegroups.Groups),
		Do: func(_ context.Context, st *pass.State) error {
			in := OpenInput{Unsafe: pass.Get(st, observe.Unsafe), Groups: pass.Get(st, nodegroups.Groups), Now: st.Started}
			if inFlight != nil {
				in.InFlight = inFlight()
			}
			g.Open(in)
			return nil
		}}
}
