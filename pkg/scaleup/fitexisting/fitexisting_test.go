package fitexisting_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestFit(t *testing.T) {
	cpuPod := func(name, cpu string) *corev1.Pod { return builder.Pod("ns", name).CPU(cpu).Obj() }
	byName := func(classes map[string]string) func(*corev1.Pod) string {
		return func(p *corev1.Pod) string { return classes[p.Name] }
	}
	tests := []struct {
		name       string
		pods       []*corev1.Pod
		candidates []string
		classOf    func(*corev1.Pod) string
		wantRest   []string
		wantPlaced map[string]string
	}{{
		name:       "fitting pods placed until the node is full, the rest returned in order",
		pods:       []*corev1.Pod{cpuPod("a", "1500m"), cpuPod("huge", "8"), cpuPod("b", "1500m"), cpuPod("c", "1500m"), cpuPod("d", "1")},
		candidates: []string{"n1"},
		classOf:    byName(nil),
		wantRest:   []string{"ns/huge", "ns/c"},
		wantPlaced: map[string]string{"a": "n1", "b": "n1", "d": "n1"},
	}, {
		name:       "only candidates are used",
		pods:       []*corev1.Pod{cpuPod("a", "1")},
		candidates: []string{"elsewhere"},
		classOf:    byName(nil),
		wantRest:   []string{"ns/a"},
		wantPlaced: map[string]string{},
	}, {
		name:       "once a class fits nowhere its later pods are not tried",
		pods:       []*corev1.Pod{cpuPod("huge", "8"), cpuPod("small", "1"), cpuPod("free", "1")},
		candidates: []string{"n1"},
		// The caller vouches that huge and small are equivalent; the
		// pod with no class is always tried.
		classOf:    byName(map[string]string{"huge": "web", "small": "web"}),
		wantRest:   []string{"ns/huge", "ns/small"},
		wantPlaced: map[string]string{"free": "n1"},
	}}
	// Each case runs with the framework making the placed pods' PodInfos
	// and with the caller's kept ones (Options.PodInfo): the same fits,
	// each placed with the caller's.
	for _, tc := range tests {
		for _, kept := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/kept PodInfos %v", tc.name, kept), func(t *testing.T) {
				_, ctx := ktesting.NewTestContext(t)
				runner, err := framework.New(ctx, framework.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := runner.Snapshot().AddNode(builder.Node("n1").CPU("4").Obj()); err != nil {
					t.Fatal(err)
				}
				opts := fitexisting.Options{ClassOf: tc.classOf}
				infos := map[*corev1.Pod]fwk.PodInfo{}
				if kept {
					opts.PodInfo = func(p *corev1.Pod) fwk.PodInfo {
						if infos[p] == nil {
							info, err := schedframework.NewPodInfo(p)
							if err != nil {
								t.Fatal(err)
							}
							infos[p] = info
						}
						return infos[p]
					}
				}
				rest, placed, err := fitexisting.FitWith(ctx, runner, tc.pods, tc.candidates, opts)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantRest, names(rest)); diff != "" {
					t.Errorf("rest (-want +got):\n%s", diff)
				}
				gotPlaced := map[string]string{}
				for p, n := range placed {
					gotPlaced[p.Name] = n
				}
				if diff := cmp.Diff(tc.wantPlaced, gotPlaced); diff != "" {
					t.Errorf("placed (-want +got):\n%s", diff)
				}
				// The placements stay in the snapshot for the stages after.
				n1, err := runner.Snapshot().NodeInfos().Get("n1")
				if err != nil {
					t.Fatal(err)
				}
				if got := len(n1.GetPods()); got != len(tc.wantPlaced) {
					t.Errorf("n1 holds %d pods, want %d", got, len(tc.wantPlaced))
				}
				for p := range placed {
					if kept && infos[p] == nil {
						t.Errorf("pod %s placed without the kept PodInfo", p.Name)
					}
				}
			})
		}
	}
}
