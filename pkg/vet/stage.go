package vet

import (
	"context"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// StageName is the vet stage's name.
const StageName = "vet"

// Stage names the pods' annotations and the drivers' slices the pass
// cannot use; it changes nothing the pass does with them.
func (v *Vetter) Stage() pass.Stage {
	return pass.Func{ID: StageName, Acting: true, In: pass.Keys(observe.Cluster),
		Do: func(_ context.Context, st *pass.State) error {
			v.Run(pass.Get(st, observe.Cluster), st.Started)
			return nil
		}}
}
