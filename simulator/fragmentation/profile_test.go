package fragmentation

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The probes are the profile's pods: on a node its addedAffinity
// excludes, none fits and all free capacity is stranded. A node alike in
// devices that the profile admits is another state: measured after the
// excluded one, it gets its own answer, the one a fresh analyzer gives
// (the differential test found ranking reuse the excluded twin's).
func TestStateKeysSeeTheProfilesAddedAffinity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg, err := builder.SchedulerConfigYAML(builder.SchedulerProfile("default-scheduler").RequireNodeLabel("pool", "a"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := framework.New(ctx, framework.Options{ConfigFile: path})
	if err != nil {
		t.Fatal(err)
	}
	node := func(name, pool string) []any {
		objs := plainNode(name, 2)
		objs[0] = builder.Node(name).CPU("64").Memory("256Gi").Label("pool", pool).Obj()
		return objs
	}
	load(t, r, plainTemplates(), node("out", "b"), node("in", "a"))
	sh := shapes(t, r, "g1")
	gpus := DevicesResource(gpuDriver)
	for _, order := range [][]string{{"out", "in"}, {"in", "out"}} {
		a := NewAnalyzer(r)
		for _, n := range order {
			rep, err := a.Node(ctx, n, sh)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := NewAnalyzer(r).Node(ctx, n, sh)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{"in": 0, "out": 2}[n]
			if Fraction(rep.Stranded, rep.Total) != Fraction(fresh.Stranded, fresh.Total) || fresh.Stranded[gpus] != want {
				t.Errorf("order %v: %s stranded %v, a fresh analyzer %v; want %v GPUs stranded", order, n, rep.Stranded, fresh.Stranded, want)
			}
		}
	}
}
