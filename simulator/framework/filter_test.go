package framework

import (
	"context"
	"sync/atomic"
	"testing"
)

func TestForEachChecksEveryNodeOnce(t *testing.T) {
	r := &Runner{parallelism: 16}
	for _, n := range []int{0, 1, minParallelNodes - 1, minParallelNodes, 100} {
		counts := make([]atomic.Int32, n)
		r.forEach(context.Background(), n, func(i int) { counts[i].Add(1) })
		for i := range counts {
			if c := counts[i].Load(); c != 1 {
				t.Fatalf("n=%d: node %d checked %d times", n, i, c)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var ran atomic.Int32
	r.forEach(ctx, 100, func(int) { ran.Add(1) })
	if ran.Load() != 0 {
		t.Fatalf("%d nodes checked after the context was cancelled", ran.Load())
	}
}
