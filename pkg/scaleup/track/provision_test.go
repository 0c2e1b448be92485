package track_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
)

// ProvisionTimes are the times from request to usable node, one per node,
// for requests whose nodes the provider named and for those it did not,
// and keep only the last track.ProvisionSamples.
func TestProvisionTimes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		named bool
	}{{"unnamed instances", false}, {"named instances", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			tr := track.New(maxProvision, newBackoff())
			g := fakeprovider.NewGroup("gpu", 0, 100)
			ask := func(n int, at time.Time) {
				ids, err := g.IncreaseSize(t.Context(), n)
				if err != nil {
					t.Fatal(err)
				}
				r := track.Request{Group: "gpu", Delta: n}
				if tc.named {
					r.Instances = ids
				}
				tr.Launched(r, at)
			}
			usable := func(n int, at time.Time) {
				instances, _ := g.Nodes()
				ids := make([]string, n)
				for i := range ids {
					ids[i] = instances[i].Id
				}
				if f := tr.Update(ctx, info(g, registered(ids...)...), at); len(f) != 0 {
					t.Fatalf("failures %+v", f)
				}
			}
			ask(2, t0)
			ask(1, t0.Add(time.Minute))
			usable(0, t0.Add(time.Minute))
			if got := tr.ProvisionTimes("gpu"); len(got) != 0 {
				t.Fatalf("nothing usable yet, got %v", got)
			}
			usable(1, t0.Add(2*time.Minute))
			usable(3, t0.Add(5*time.Minute))
			want := []time.Duration{2 * time.Minute, 5 * time.Minute, 4 * time.Minute}
			if d := cmp.Diff(want, tr.ProvisionTimes("gpu")); d != "" {
				t.Errorf("times (-want +got):\n%s", d)
			}
			usable(3, t0.Add(6*time.Minute))
			if d := cmp.Diff(want, tr.ProvisionTimes("gpu")); d != "" {
				t.Errorf("a node counted twice (-want +got):\n%s", d)
			}
			if got := tr.ProvisionTimes("other"); len(got) != 0 {
				t.Errorf("other group: %v", got)
			}
			for i := range track.ProvisionSamples {
				ask(1, t0.Add(time.Duration(10+i)*time.Minute))
				usable(4+i, t0.Add(time.Duration(11+i)*time.Minute))
			}
			got := tr.ProvisionTimes("gpu")
			if len(got) != track.ProvisionSamples {
				t.Fatalf("%d samples kept, want %d", len(got), track.ProvisionSamples)
			}
			for _, d := range got {
				if d != time.Minute {
					t.Fatalf("older samples kept: %v", got)
				}
			}
		})
	}
}
