package fitexisting_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestFitRanked(t *testing.T) {
	reversed := func(_ context.Context, _ *corev1.Pod, c []string) ([]string, error) {
		out := slices.Clone(c)
		slices.Reverse(out)
		return out, nil
	}
	failing := func(context.Context, *corev1.Pod, []string) ([]string, error) { return nil, errors.New("boom") }
	tests := []struct {
		name     string
		rank     fitexisting.RankFunc
		wantNode string
		wantErr  bool
	}{
		{"no ranking: first fit", nil, "n1", false},
		{"the ranking's first choice wins", reversed, "n2", false},
		{"a ranking error stops the stage", failing, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			r, err := framework.New(ctx, framework.Options{})
			if err != nil {
				t.Fatal(err)
			}
			snapshottest.Load(t, r.Snapshot(), builder.Node("n1").CPU("4").Obj(), builder.Node("n2").CPU("4").Obj())
			pod := builder.Pod("ns", "p").CPU("1").Obj()
			_, placed, err := fitexisting.FitRanked(ctx, r, []*corev1.Pod{pod}, []string{"n1", "n2"}, func(*corev1.Pod) string { return "" }, tc.rank)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if placed[pod] != tc.wantNode {
				t.Errorf("placed on %q, want %s", placed[pod], tc.wantNode)
			}
		})
	}
}

// A pod that needs another pending pod placed first (pod affinity) fits
// on the next sweep, as it would once the scheduler binds the other.
func TestFitRetriesAffinity(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, r.Snapshot(), builder.Node("n1").CPU("4").Obj())
	follower := builder.Pod("ns", "follower").CPU("1").Obj()
	follower.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "leader"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	leader := builder.Pod("ns", "leader").CPU("1").Label("app", "leader").Obj()
	classOf := func(p *corev1.Pod) string {
		if p.Spec.Affinity != nil {
			return ""
		}
		return p.Name
	}
	rest, placed, err := fitexisting.FitRanked(ctx, r, []*corev1.Pod{follower, leader}, []string{"n1"}, classOf, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 0 || placed[follower] != "n1" || placed[leader] != "n1" {
		t.Errorf("rest %v, placed %v; want both on n1", names(rest), placed)
	}
}
