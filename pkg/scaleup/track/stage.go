package track

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// Keys the track stage writes: the scale-ups given up in the pass, and the
// provider calls of the tracker that failed (the report stage tells them).
var (
	Failures = pass.NewKey[[]Failure]("scaleUpFailures")
	Errors   = pass.NewKey[[]RemovalError]("trackerErrors")
)

// StageName is the track stage's name.
const StageName = "track"

// Stage follows the scale-ups in flight and gives up what failed; failed
// (nil: nothing) counts each failure's reason (failed_scale_ups_total).
func (t *Tracker) Stage(failed func(reason string)) pass.Stage {
	return pass.Func{ID: StageName, Acting: true, In: pass.Keys(nodegroups.Groups), Out: pass.Keys(Failures, Errors),
		Do: func(ctx context.Context, st *pass.State) error {
			failures := t.Update(ctx, pass.Get(st, nodegroups.Groups), st.Started)
			for _, f := range failures {
				if failed != nil {
					failed(f.Reason)
				}
			}
			pass.Put(st, Failures, failures)
			pass.Put(st, Errors, t.TakeErrors())
			return nil
		}}
}
