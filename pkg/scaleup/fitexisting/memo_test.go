package fitexisting_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const gpuDriver = "gpu.example.com"

// memoCluster is 12 nodes of 4 GPUs and 8 CPUs, some GPUs held by running
// pods, and pending pods of four classes interleaved: 1 and 2 GPUs from
// claim templates, CPU only, and 2 GPUs pinned by a node selector.
func memoCluster(t *testing.T) (*framework.Runner, context.Context, []string, []*corev1.Pod) {
	return memoClusterOf(t, false)
}

// memoClusterOf is memoCluster, or with alike its nodes in two kinds (zone
// 1 and no GPU used, zone 0 and one used), as node keys see them, but for
// n05, like no other: it runs a pod with required anti-affinity.
func memoClusterOf(t *testing.T, alike bool) (*framework.Runner, context.Context, []string, []*corev1.Pod) {
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs := []any{builder.DeviceClass("gpu").Driver(gpuDriver).Obj(),
		builder.ClaimTemplate("ns", "one").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.ClaimTemplate("ns", "two").Request(builder.Request("gpu", "gpu").Count(2)).Obj()}
	var nodes []string
	for i := range 12 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, name)
		slice := builder.ResourceSlice(name, name, gpuDriver, name)
		for d := range 4 {
			slice.Devices(builder.Device(fmt.Sprintf("gpu-%d", d)))
		}
		zone, used := i%3, i%4
		if alike {
			zone, used = (i+1)%2, i%2
		}
		objs = append(objs, builder.Node(name).CPU("8").Label("zone", fmt.Sprint(zone)).Obj(), slice.Obj())
		for d := range used {
			run := fmt.Sprintf("run-%d-%d", i, d)
			pod := builder.Pod("ns", run).CPU("1").Claim("gpu", run).Node(name).Obj()
			objs = append(objs, pod, builder.Claim("ns", run).Request(builder.Request("gpu", "gpu")).
				Allocated(name, builder.AllocatedDevice("gpu", gpuDriver, name, fmt.Sprintf("gpu-%d", d))).ReservedFor(pod).Obj())
		}
	}
	if alike {
		solo := builder.Pod("ns", "solo").CPU("1").Label("app", "solo").Node("n05").Obj()
		solo.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "solo"}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
		objs = append(objs, solo)
	}
	snapshottest.Load(t, r.Snapshot(), objs...)
	var pods []*corev1.Pod
	for i := range 40 {
		b := builder.Pod("ns", fmt.Sprintf("p%02d", i)).OwnedBy("apps/v1", "ReplicaSet", fmt.Sprint(i%4))
		switch i % 4 {
		case 0:
			b.CPU("1").ClaimFromTemplate("gpu", "one")
		case 1:
			b.CPU("2").ClaimFromTemplate("gpu", "two")
		case 2:
			b.CPU("3")
		case 3:
			b.CPU("1").ClaimFromTemplate("gpu", "two").NodeSelector("zone", "1")
		}
		pods = append(pods, b.Obj())
	}
	return r, ctx, nodes, pods
}

// reference is the stage as it was before the memos: every pod filtered
// over every candidate, its feasible nodes ranked, then scheduled over all.
func reference(ctx context.Context, t *testing.T, r *framework.Runner, pods []*corev1.Pod, nodes []string, rank fitexisting.RankFunc) map[string]string {
	placed := map[string]string{}
	for _, pod := range pods {
		order := nodes
		if rank != nil {
			res, err := r.RunFilters(ctx, pod, nodes)
			if err != nil {
				t.Fatal(err)
			}
			var feasible, rest []string
			for _, v := range res {
				if v.Fits {
					feasible = append(feasible, v.Node)
				} else {
					rest = append(rest, v.Node)
				}
			}
			if order, err = rank(ctx, pod, feasible); err != nil {
				t.Fatal(err)
			}
			order = append(slices.Clip(order), rest...)
		}
		p, err := r.SchedulePod(ctx, pod, order)
		if err != nil {
			t.Fatal(err)
		}
		if p.Node != "" {
			placed[pod.Name] = p.Node
		}
	}
	return placed
}

// TestFitExistingMemoIsExact: closed nodes, known fits and the early stop
// change what is asked of the framework, never its answers: with a sample
// as large as the cluster, every pod lands where the unmemoised stage
// puts it.
func TestFitExistingMemoIsExact(t *testing.T) {
	reversed := func(_ context.Context, _ *corev1.Pod, c []string) ([]string, error) {
		out := slices.Clone(c)
		slices.Reverse(out)
		return out, nil
	}
	// fullest ranks by what the nodes' state is, ties to the earlier, as
	// RankFunc must with keys: nodes holding more pods first.
	fullest := func(r *framework.Runner) fitexisting.RankFunc {
		return func(_ context.Context, _ *corev1.Pod, c []string) ([]string, error) {
			pods := func(n string) int {
				ni, err := r.Snapshot().NodeInfos().Get(n)
				if err != nil {
					t.Fatal(err)
				}
				return len(ni.GetPods())
			}
			out := slices.Clone(c)
			slices.SortStableFunc(out, func(a, b string) int { return pods(b) - pods(a) })
			return out, nil
		}
	}
	tests := []struct {
		name  string
		rank  func(*framework.Runner) fitexisting.RankFunc
		alike bool // nodes in two kinds, and node keys on
		copy  bool // placements copied between nodes of a key
	}{
		{"first fit", nil, false, false},
		{"ranked", func(*framework.Runner) fitexisting.RankFunc { return reversed }, false, false},
		{"first fit, node keys", nil, true, false},
		{"ranked, node keys", fullest, true, false},
		{"first fit, node keys, placements copied", nil, true, true},
		{"ranked, node keys, placements copied", fullest, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx, nodes, pods := memoClusterOf(t, tc.alike)
			var rank fitexisting.RankFunc
			if tc.rank != nil {
				rank = tc.rank(r)
			}
			r.Snapshot().Fork()
			want := reference(ctx, t, r, pods, nodes, rank)
			wantState := placedState(t, r)
			if err := r.Snapshot().Revert(); err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || len(want) == len(pods) {
				t.Fatalf("reference placed %d of %d pods: the cluster tests nothing", len(want), len(pods))
			}
			est := estimator.New(r, estimator.Options{})
			opts := fitexisting.Options{ClassOf: est.ClassKey, Memoizable: est.Memoizable, Rank: rank, Sample: len(nodes)}
			if tc.alike {
				keys, err := estimator.NewNodeKeys(r.Snapshot(), r.Profile(), pods)
				if err != nil || keys == nil {
					t.Fatalf("NewNodeKeys: %v, %v", keys, err)
				}
				if keys.Of(nodes[0]) == "" || keys.Of(nodes[0]) != keys.Of(nodes[2]) || keys.Of(nodes[5]) != "" {
					t.Fatalf("alike nodes %s and %s have keys %q and %q; %s, running a pod with required anti-affinity, %q",
						nodes[0], nodes[2], keys.Of(nodes[0]), keys.Of(nodes[2]), nodes[5], keys.Of(nodes[5]))
				}
				opts.Keys = keys
			}
			copier := &countingCopier{Estimator: est}
			if tc.copy {
				opts.Copier = copier
			}
			rest, placed, err := fitexisting.FitWith(ctx, r, pods, nodes, opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.copy && copier.copies == 0 {
				t.Error("no placement copied: the case checks nothing")
			}
			if got := placedState(t, r); got != wantState {
				t.Errorf("snapshot after the stage differs from the unmemoised one:\n%s\nwant\n%s", got, wantState)
			}
			got := map[string]string{}
			for pod, node := range placed {
				got[pod.Name] = node
			}
			for _, pod := range pods {
				if got[pod.Name] != want[pod.Name] {
					t.Errorf("pod %s on %q, unmemoised on %q", pod.Name, got[pod.Name], want[pod.Name])
				}
			}
			if len(rest)+len(placed) != len(pods) {
				t.Errorf("%d left + %d placed of %d pods", len(rest), len(placed), len(pods))
			}
		})
	}
}

// countingCopier counts the placements copied.
type countingCopier struct {
	*estimator.Estimator
	copies int
}

func (c *countingCopier) CopyPlacement(pod *corev1.Pod, info fwk.PodInfo, p *estimator.NodePlacement, node string) (bool, error) {
	ok, err := c.Estimator.CopyPlacement(pod, info, p, node)
	if ok {
		c.copies++
	}
	return ok, err
}

// placedState renders the pods on each node with their claim statuses and
// every claim with its allocation and reservations.
func placedState(t *testing.T, r *framework.Runner) string {
	t.Helper()
	var b strings.Builder
	nodes, err := r.Snapshot().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, ni := range nodes {
		fmt.Fprintf(&b, "node %s:", ni.Node().Name)
		for _, p := range ni.GetPods() {
			fmt.Fprintf(&b, " %s", p.GetPod().Name)
			for _, st := range p.GetPod().Status.ResourceClaimStatuses {
				fmt.Fprintf(&b, "[%s=%s]", st.Name, ptr.Deref(st.ResourceClaimName, ""))
			}
		}
		b.WriteString("\n")
	}
	claims, err := r.Snapshot().ResourceClaims().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims {
		var owners []string
		for _, o := range c.OwnerReferences {
			owners = append(owners, o.Kind+"/"+o.Name)
		}
		fmt.Fprintf(&b, "claim %s owners=%v finalizers=%v reserved=%v", c.Name, owners, c.Finalizers, c.Status.ReservedFor)
		if a := c.Status.Allocation; a != nil {
			fmt.Fprintf(&b, " on %s: %v", a.NodeSelector.String(), a.Devices.Results)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestFitExistingSample: a sample smaller than the feasible nodes may
// change where pods go, not how many fit.
func TestFitExistingSample(t *testing.T) {
	r, ctx, nodes, pods := memoCluster(t)
	est := estimator.New(r, estimator.Options{})
	reversed := func(_ context.Context, _ *corev1.Pod, c []string) ([]string, error) {
		out := slices.Clone(c)
		slices.Reverse(out)
		return out, nil
	}
	r.Snapshot().Fork()
	_, all, err := fitexisting.FitWith(ctx, r, pods, nodes, fitexisting.Options{ClassOf: est.ClassKey, Memoizable: est.Memoizable, Rank: reversed, Sample: len(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Snapshot().Revert(); err != nil {
		t.Fatal(err)
	}
	_, sampled, err := fitexisting.FitWith(ctx, r, pods, nodes, fitexisting.Options{ClassOf: est.ClassKey, Memoizable: est.Memoizable, Rank: reversed, Sample: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(sampled) != len(all) {
		t.Errorf("sample of 2 placed %d pods, the whole cluster %d", len(sampled), len(all))
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for n, want := range map[int]int{0: 0, 50: 50, 99: 99, 100: 100, 200: 100, 1000: 420, 5000: 500, 10000: 500} {
		if got := fitexisting.NumFeasibleNodesToFind(n); got != want {
			t.Errorf("NumFeasibleNodesToFind(%d) = %d, want %d", n, got, want)
		}
	}
}
