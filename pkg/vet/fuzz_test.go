package vet

import (
	"encoding/json"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// FuzzPools: whatever drivers publish, checking their pools never panics
// and every finding names a slice.
func FuzzPools(f *testing.F) {
	seeds := [][]*resourceapi.ResourceSlice{
		{builder.ResourceSlice("a", "n1", driver, "p").Pool(1, 2).Devices(builder.Device("gpu-0")).Obj()},
		{builder.ResourceSlice("c", "n1", driver, "p").Pool(1, 2).SharedCounters(builder.CounterSet("gpu-0").Counter("memory", "40Gi")).Obj(),
			builder.ResourceSlice("d", "n1", driver, "p").Pool(1, 2).
				Devices(builder.Device("big").ConsumesCounters("gpu-0", map[string]string{"memory": "80Gi"})).Obj()},
	}
	for _, s := range seeds {
		data, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var slices []*resourceapi.ResourceSlice
		if err := json.Unmarshal(data, &slices); err != nil {
			return
		}
		for i := range slices {
			if slices[i] == nil {
				slices[i] = &resourceapi.ResourceSlice{}
			}
		}
		for _, f := range Pools(slices) {
			if f.Object == nil || f.Message == "" {
				t.Fatalf("finding without object or message: %+v", f)
			}
		}
	})
}
