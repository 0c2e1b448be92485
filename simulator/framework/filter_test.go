package framework

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
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

// A pass cancelled while it filters gets an error, not verdicts: the
// nodes left unchecked would read as "does not fit" (and, in verify mode,
// as the plain framework disagreeing with a shortcut's remembered
// rejection, which is how an e2e test's autoscaler stopped mid-pass was
// first seen to fail).
func TestFilterCancelledIsAnError(t *testing.T) {
	r, ctx := newRunner(t, "")
	var names []string
	for i := range 2 * minParallelNodes {
		n := builder.Node(fmt.Sprintf("n%d", i)).CPU("4").Memory("8Gi").Obj()
		if err := r.Snapshot().AddNode(n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n.Name)
	}
	pod := builder.Pod(ns, "p").CPU("1").Obj()
	res, err := r.SchedulePod(ctx, pod, names)
	if err != nil || res.Node == "" {
		t.Fatalf("live context: placed on %v, err %v; want a node", res, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if res, err := r.SchedulePod(cancelled, builder.Pod(ns, "q").CPU("1").Obj(), names); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: result %+v, err %v; want context.Canceled", res, err)
	}
}
