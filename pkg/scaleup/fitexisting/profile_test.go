package fitexisting_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework/frameworktest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// TestFitExistingHonoursTheProfile: with the scheduler profile's
// arguments in play, the stage with every shortcut on (classes, memo,
// node keys, copied placements, as the autoscaler wires it) places pods
// where the stage without them does. Nodes alike but for a label the
// profile's addedAffinity requires must not share verdicts; pods the
// profile spreads by hostname must not be closed out of a node that
// refused them once or have a fit copied to a node "like" it.
func TestFitExistingHonoursTheProfile(t *testing.T) {
	const pool = "example.com/pool"
	web := func(n int) []*corev1.Pod {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = builder.Pod("ns", fmt.Sprintf("web-%d", i)).CPU("1").Label("app", "web").OwnedBy("apps/v1", "ReplicaSet", "web").Obj()
		}
		return pods
	}
	tests := []struct {
		name    string
		profile *builder.SchedulerProfileBuilder
		cluster []runtime.Object // what the plugins read through informers
		nodes   []any            // in candidate order
		pods    []*corev1.Pod
		want    int // pods placed
	}{{
		name:    "addedAffinity requires a label one of two alike nodes has",
		profile: builder.SchedulerProfile("accel").RequireNodeLabel(pool, "accel"),
		// accel has room for one pod; plain, the same but for the label,
		// for all: copying accel's first fit there would place them.
		nodes: []any{builder.Node("accel").CPU("1").Label(pool, "accel").Obj(), builder.Node("plain").CPU("1").Obj()},
		pods:  web(3),
		want:  1,
	}, {
		name:    "hard default spread by hostname",
		profile: builder.SchedulerProfile("spread").HardDefaultSpread(corev1.LabelHostname, 1),
		cluster: []runtime.Object{builder.Service("ns", "web", map[string]string{"app": "web"})},
		nodes:   []any{builder.Node("n1").CPU("4").Obj(), builder.Node("n2").CPU("4").Obj()},
		pods:    web(4),
		want:    4,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg, err := builder.SchedulerConfigYAML(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			r := frameworktest.Runner(t, ctx, cfg, tc.cluster...)
			snapshottest.Load(t, r.Snapshot(), tc.nodes...)
			var candidates []string
			for _, n := range tc.nodes {
				candidates = append(candidates, n.(*corev1.Node).Name)
			}
			// The autoscaler always ranks; unranked placements keep the
			// order.
			keep := func(_ context.Context, _ *corev1.Pod, feasible []string) ([]string, error) { return feasible, nil }
			run := func(opts fitexisting.Options) map[string]string {
				t.Helper()
				opts.Rank, opts.Sample = keep, len(candidates)
				r.Snapshot().Fork()
				defer func() {
					if err := r.Snapshot().Revert(); err != nil {
						t.Fatal(err)
					}
				}()
				_, placed, err := fitexisting.FitWith(ctx, r, tc.pods, candidates, opts)
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]string{}
				for p, n := range placed {
					out[p.Name] = n
				}
				return out
			}
			want := run(fitexisting.Options{})
			if len(want) != tc.want {
				t.Fatalf("without shortcuts %d pods placed (%v), want %d: the case tests nothing", len(want), want, tc.want)
			}
			est := estimator.New(r, estimator.Options{})
			keys, err := estimator.NewNodeKeys(r.Snapshot(), r.Profile(), tc.pods)
			if err != nil || keys == nil {
				t.Fatalf("NewNodeKeys: %v, %v", keys, err)
			}
			got := run(fitexisting.Options{ClassOf: est.ClassKey, Memoizable: est.Memoizable, Keys: keys, Copier: est})
			if !maps.Equal(got, want) {
				t.Errorf("with shortcuts %v, without %v", got, want)
			}
		})
	}
}
