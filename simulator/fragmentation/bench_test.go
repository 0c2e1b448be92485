package fragmentation

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
)

// BenchmarkAnalyzeCluster measures one pass of the stranded-capacity stage
// over 500 GPU nodes in seeded random states, with a cold memo (the first
// pass after start or a device class change) and a warm one (every later
// pass): the cost follows the distinct node states, not the nodes.
//
//	go test -run '^$' -bench AnalyzeCluster ./simulator/fragmentation/
func BenchmarkAnalyzeCluster(b *testing.B) {
	const nodes = 500
	r, ctx := newRunner(b)
	load(b, r)
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
		snapshottest.Load(b, r.Snapshot(), migNode(names[i])...)
		used := 0
		for k := 0; used < 7; k++ {
			size := 1 + rng.IntN(3)
			if used+size > 7 || rng.IntN(3) == 0 {
				break
			}
			place(b, ctx, r, fmt.Sprintf("p%d-%d", i, k), fmt.Sprintf("s%d", size), names[i])
			used += size
		}
	}
	sh := shapes(b, r, "s2", "s3", "whole")
	for _, warm := range []bool{false, true} {
		b.Run(fmt.Sprintf("warm=%v", warm), func(b *testing.B) {
			a := NewAnalyzer(r)
			if warm {
				for _, n := range names {
					if _, err := a.Node(ctx, n, sh); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			calls := a.Calls
			for b.Loop() {
				if !warm {
					a.Forget()
				}
				for _, n := range names {
					if _, err := a.Node(ctx, n, sh); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(a.Calls-calls)/float64(b.N), "probes/pass")
		})
	}
}
