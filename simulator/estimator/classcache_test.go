package estimator

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The class cache outlives passes (pods pending pass after pass are
// keyed once) but not the pods: however passes use it, pods gone for a
// pass leave it, and the pods of the last two passes are all it holds.
func TestClassCacheForgetsPodsGone(t *testing.T) {
	const perPass = 6
	for _, tc := range []struct {
		name string
		use  func(ctx context.Context, e *Estimator, pods []*v1.Pod) error
	}{
		// Every pod fits the nodes there are: nothing is estimated.
		{"fit-existing's classes only", func(_ context.Context, e *Estimator, pods []*v1.Pod) error {
			for _, p := range pods {
				if e.ClassKey(p) == "" || !e.Memoizable(p) {
					return fmt.Errorf("pod %s has no memoizable class", p.Name)
				}
			}
			return nil
		}},
		{"classes of some, estimates of the others", func(ctx context.Context, e *Estimator, pods []*v1.Pod) error {
			for _, p := range pods[:perPass/2] {
				e.ClassKey(p)
			}
			_, err := e.EstimateGroups(ctx, pods[perPass/2:], []TemplateGroup{{Name: "g", Template: gpuTemplate(8, nil)}})
			return err
		}},
		{"kept estimates only", func(ctx context.Context, e *Estimator, pods []*v1.Pod) error {
			_, err := e.EstimateAndKeep(ctx, pods, gpuTemplate(8, nil), "g")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t)
			e := New(r, Options{})
			// One pod stays pending throughout; the others come and go.
			stays := builder.Pod(ns, "stays").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").Obj()
			for pass := range 100 {
				if err := r.Snapshot().Reset(); err != nil {
					t.Fatal(err)
				}
				var pods []*v1.Pod
				for i := 1; i < perPass; i++ {
					pods = append(pods, builder.Pod(ns, fmt.Sprintf("p-%d-%d", pass, i)).CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").Obj())
				}
				pods = append(pods, stays)
				if err := tc.use(ctx, e, pods); err != nil {
					t.Fatalf("pass %d: %v", pass, err)
				}
				if n := len(e.cache.entries) + len(e.cache.prev); n > 2*perPass {
					t.Fatalf("pass %d: %d pods cached, want at most the last two passes' %d", pass, n, 2*perPass)
				}
				if _, ok := e.cache.lookup(stays); !ok {
					t.Fatalf("pass %d: the pod pending throughout left the cache", pass)
				}
			}
		})
	}
}
