// Package parallel runs independent pieces of one computation on the
// process's processors: reads of the snapshot may run concurrently (the
// framework filters nodes that way), so per-node and per-pod work that
// only reads it, done for thousands of objects in a pass, is split too.
package parallel

import (
	"context"
	"runtime"

	"k8s.io/client-go/util/workqueue"
)

// chunk is how many pieces a worker takes at once: each piece is a few
// microseconds, too little to hand out one by one.
const chunk = 64

// Each calls fn(i) for every i in [0, n), on one goroutine per atLeast
// pieces up to GOMAXPROCS, on the caller's alone when that is one. fn
// must be safe to run concurrently with itself for distinct i.
func Each(n, atLeast int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(atLeast, 1))
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	workqueue.ParallelizeUntil(context.Background(), workers, n, fn, workqueue.WithChunkSize(chunk))
}
