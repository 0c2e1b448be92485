package estimator

import (
	"encoding/json"
	"fmt"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// outcome is a Estimate in comparable form: new nodes, pod -> node, and
// pod -> rejecting plugin or limit.
type outcome struct {
	Nodes    []string
	Placed   []string
	Unplaced []string
	Limited  string
	Devices  int
}

func outcomeOf(r *Estimate) outcome {
	o := outcome{Nodes: r.NewNodes, Limited: r.Limited, Devices: r.DevicesUsed}
	for _, p := range r.Placements {
		o.Placed = append(o.Placed, p.Pod.Name+"@"+p.Node)
	}
	for u := range r.Unplaced.All() {
		o.Unplaced = append(o.Unplaced, u.Pod.Name+":"+u.Result.Plugin+u.Limit)
	}
	return o
}

func TestEstimate(t *testing.T) {
	gpuNIC := builder.ClaimTemplate(ns, "gpu-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj()
	nineGPUs := builder.ClaimTemplate(ns, "nine-gpus").Request(builder.Request("gpu", "gpu").Count(9)).Obj()
	oneGPU := builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()
	tests := []struct {
		name      string
		tmpl      *cloudprovider.NodeTemplate
		objects   []any
		pods      []*v1.Pod
		opts      Options
		wantNodes int
		// wantPerNode counts pods per new node, in opening order.
		wantPerNode []int
		wantPlugin  string // plugin rejecting the unplaced pods
		wantLimited string
		wantUnplace int
		wantDevices int
	}{{
		name:        "8 GPU+NIC pairs per node, the 9th opens a second",
		tmpl:        gpuNICTemplate(),
		objects:     []any{gpuNIC},
		pods:        templatePods("pair", "gpu-nic", "1", 9),
		wantNodes:   2,
		wantPerNode: []int{8, 1},
		wantDevices: 18,
	}, {
		name:        "a class that fits no empty node opens none",
		tmpl:        gpuTemplate(8, nil),
		objects:     []any{nineGPUs},
		pods:        templatePods("big", "nine-gpus", "1", 5),
		wantPlugin:  names.DynamicResources,
		wantUnplace: 5,
	}, {
		name:        "CPU bounds GPU pods: 2 per 64-CPU node",
		tmpl:        gpuTemplate(8, nil),
		objects:     []any{oneGPU},
		pods:        templatePods("fat", "one-gpu", "30", 5),
		wantNodes:   3,
		wantPerNode: []int{2, 2, 1},
		wantDevices: 5,
	}, {
		name:        "node selector the template lacks",
		tmpl:        gpuTemplate(8, nil),
		objects:     []any{oneGPU},
		pods:        []*v1.Pod{builder.Pod(ns, "picky").NodeSelector("zone", "b").UID("picky").Obj()},
		wantPlugin:  names.NodeAffinity,
		wantUnplace: 1,
	}, {
		name:        "max nodes stops the estimate",
		tmpl:        gpuTemplate(8, nil),
		objects:     []any{oneGPU},
		pods:        templatePods("many", "one-gpu", "1", 20),
		opts:        Options{MaxNodes: 2},
		wantNodes:   2,
		wantPerNode: []int{8, 8},
		wantLimited: LimitMaxNodes,
		wantUnplace: 4,
		wantDevices: 16,
	}, {
		name:        "max duration stops the estimate",
		tmpl:        gpuTemplate(8, nil),
		objects:     []any{oneGPU},
		pods:        templatePods("slow", "one-gpu", "1", 3),
		opts:        Options{MaxDuration: time.Nanosecond},
		wantLimited: LimitMaxDuration,
		wantUnplace: 3,
	}}
	for _, tc := range tests {
		for _, memo := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/memo=%v", tc.name, memo), func(t *testing.T) {
				r, ctx := newRunner(t)
				snapshottest.Load(t, r.Snapshot(), classes()...)
				snapshottest.Load(t, r.Snapshot(), tc.objects...)
				opts := tc.opts
				opts.DisableMemo = !memo
				res, err := New(r, opts).Estimate(ctx, tc.pods, tc.tmpl, "g")
				if err != nil {
					t.Fatal(err)
				}
				perNode := map[string]int{}
				for _, p := range res.Placements {
					perNode[p.Node]++
				}
				var counts []int
				for _, n := range res.NewNodes {
					counts = append(counts, perNode[n])
				}
				if res.NodeCount != tc.wantNodes || !slices.Equal(counts, tc.wantPerNode) || res.Limited != tc.wantLimited ||
					res.Unplaced.Len() != tc.wantUnplace || res.DevicesUsed != tc.wantDevices {
					t.Fatalf("got %+v, pods per node %v", outcomeOf(res), counts)
				}
				for u := range res.Unplaced.All() {
					if u.Limit == "" && (u.Result.Plugin != tc.wantPlugin || u.Result.Fits || u.Result.Message == "") {
						t.Errorf("pod %s unplaced with %+v, want plugin %q", u.Pod.Name, u.Result, tc.wantPlugin)
					}
				}
				if tc.wantPlugin != "" && res.FrameworkCalls > 1 && memo {
					t.Errorf("%d framework calls for a class that fits no empty node, want 1", res.FrameworkCalls)
				}
			})
		}
	}
}

// TestMatchAttributePairs keeps the GPU+NIC estimate and checks that every
// pair sits on one PCIe root of its own node.
func TestMatchAttributePairs(t *testing.T) {
	r, ctx := newRunner(t)
	s := r.Snapshot()
	snapshottest.Load(t, s, classes()...)
	snapshottest.Load(t, s, builder.ClaimTemplate(ns, "gpu-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj())
	res, err := New(r, Options{}).EstimateAndKeep(ctx, templatePods("pair", "gpu-nic", "1", 17), gpuNICTemplate(), "g")
	if err != nil || res.NodeCount != 3 {
		t.Fatalf("got %+v, %v; want 3 nodes", res, err)
	}
	sl, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	root := map[string]string{}
	for _, x := range sl {
		for _, d := range x.Spec.Devices {
			root[x.Spec.Driver+"/"+x.Spec.Pool.Name+"/"+d.Name] = *d.Attributes[pcieRoot].StringValue
		}
	}
	claims, _ := s.ResourceClaims().List()
	if len(claims) != 17 {
		t.Fatalf("%d claims kept, want 17", len(claims))
	}
	for _, c := range claims {
		res := c.Status.Allocation.Devices.Results
		r0, r1 := root[res[0].Driver+"/"+res[0].Pool+"/"+res[0].Device], root[res[1].Driver+"/"+res[1].Pool+"/"+res[1].Device]
		node := c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
		if r0 == "" || r0 != r1 || !strings.HasPrefix(res[0].Pool, node) || !strings.HasPrefix(res[1].Pool, node) {
			t.Errorf("claim %s: %s on %q, %s on %q, node %s", c.Name, res[0].Pool, r0, res[1].Pool, r1, node)
		}
	}
}

func TestEstimateIsDeterministicAndLeavesSnapshot(t *testing.T) {
	r, ctx := bigCluster(t, 20, 12)
	s := r.Snapshot()
	pods, objs := shapedPods(120, 6)
	snapshottest.Load(t, s, objs...)
	before := dump(t, s)
	e := New(r, Options{})
	first, err := e.Estimate(ctx, pods, gpuTemplate(8, nil), "g")
	if err != nil {
		t.Fatal(err)
	}
	if after := dump(t, s); after != before || s.Depth() != 0 {
		t.Fatalf("Estimate changed the snapshot (depth %d):\n%s", s.Depth(), firstDiff(before, after))
	}
	shuffled := slices.Clone(pods)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, k int) { shuffled[i], shuffled[k] = shuffled[k], shuffled[i] })
	for i, in := range [][]*v1.Pod{pods, shuffled} {
		again, err := New(r, Options{}).Estimate(ctx, in, gpuTemplate(8, nil), "g")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(outcomeOf(first), outcomeOf(again)) {
			t.Fatalf("run %d differs:\n%+v\n%+v", i, outcomeOf(first), outcomeOf(again))
		}
	}
	// PodInfos from the caller's cache (UsePodInfos) change nothing.
	shared := New(r, Options{})
	asked := map[*v1.Pod]bool{}
	shared.UsePodInfos(func(p *v1.Pod) fwk.PodInfo { asked[p] = true; return newPodInfo(p) })
	if again, err := shared.Estimate(ctx, pods, gpuTemplate(8, nil), "g"); err != nil || !reflect.DeepEqual(outcomeOf(first), outcomeOf(again)) {
		t.Fatalf("with the caller's PodInfos: %+v, %v; want %+v", outcomeOf(again), err, outcomeOf(first))
	}
	if len(asked) != len(pods) {
		t.Errorf("the caller's cache was asked for %d pods' PodInfos, want %d", len(asked), len(pods))
	}
	groups, err := e.EstimateGroups(ctx, pods, []TemplateGroup{{Name: "g", Template: gpuTemplate(8, nil)}, {Name: "h", Template: gpuTemplate(4, nil), MaxNodes: 1}})
	if err != nil || !reflect.DeepEqual(outcomeOf(groups[0]), outcomeOf(first)) {
		t.Fatalf("EstimateGroups differs from Estimate: %v", err)
	}
	if groups[1].NodeCount != 1 || groups[1].Limited != LimitMaxNodes {
		t.Errorf("group cap of 1 node: got %d nodes, limited %q", groups[1].NodeCount, groups[1].Limited)
	}
	capped, err := e.WithLimits(Options{MaxNodes: 2}).Estimate(ctx, pods, gpuTemplate(8, nil), "g")
	if err != nil || capped.NodeCount != 2 || capped.Limited != LimitMaxNodes {
		t.Errorf("WithLimits(2): %+v, %v", outcomeOf(capped), err)
	}
	if after := dump(t, s); after != before {
		t.Fatalf("EstimateGroups changed the snapshot:\n%s", firstDiff(before, after))
	}
}

func TestEstimateAndKeep(t *testing.T) {
	r, ctx := bigCluster(t, 5, 8)
	s := r.Snapshot()
	snapshottest.Load(t, s, builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj())
	pods := templatePods("a", "one-gpu", "1", 10)
	e := New(r, Options{})
	est, err := e.Estimate(ctx, pods, gpuTemplate(8, nil), "g")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.EstimateAndKeep(ctx, pods, gpuTemplate(8, nil), "g")
	if err != nil || !reflect.DeepEqual(outcomeOf(est), outcomeOf(kept)) {
		t.Fatalf("kept %+v, estimated %+v, err %v", outcomeOf(kept), outcomeOf(est), err)
	}
	for _, n := range kept.NewNodes {
		if ni, err := s.Get(n); err != nil || len(ni.GetPods()) == 0 {
			t.Errorf("kept node %s missing or empty: %v", n, err)
		}
	}
	// The next estimate for the same group must not reuse kept names.
	next, err := e.Estimate(ctx, templatePods("b", "one-gpu", "1", 1), gpuTemplate(8, nil), "g")
	if err != nil || next.NewNodes[0] != "g-template-2" {
		t.Fatalf("next estimate: %+v, %v; want node g-template-2", next, err)
	}
}

func TestBadInput(t *testing.T) {
	r, ctx := newRunner(t)
	e := New(r, Options{})
	tmpl := gpuTemplate(8, nil)
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"nil template", func() error { _, err := e.Estimate(ctx, nil, nil, "g"); return err }, "template without a node"},
		{"no group name", func() error { _, err := e.Estimate(ctx, nil, tmpl, ""); return err }, "without a name"},
		{"pod without UID", func() error {
			_, err := e.Estimate(ctx, []*v1.Pod{builder.Pod(ns, "p").UID("").Obj()}, tmpl, "g")
			return err
		}, "no UID"},
		{"nil pod", func() error { _, err := e.Estimate(ctx, []*v1.Pod{nil}, tmpl, "g"); return err }, "nil pod"},
		{"no runner", func() error { _, err := New(nil, Options{}).Estimate(ctx, nil, tmpl, "g"); return err }, "without a framework runner"},
	}
	for _, tc := range tests {
		if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	if r.Snapshot().Depth() != 0 {
		t.Errorf("fork left open after errors")
	}
}

// dump renders what the framework can read from a snapshot: nodes with
// their pods in list order, claims, slices and the allocated devices.
func dump(t *testing.T, s *snapshot.Snapshot) string {
	t.Helper()
	var b strings.Builder
	nodes, _ := s.NodeInfos().List()
	for _, ni := range nodes {
		fmt.Fprintf(&b, "node %s:", ni.Node().Name)
		for _, p := range ni.GetPods() {
			pod := p.GetPod()
			fmt.Fprintf(&b, " %s/%s(%s)", pod.Namespace, pod.Name, pod.UID)
			for _, st := range pod.Status.ResourceClaimStatuses {
				fmt.Fprintf(&b, "[%s=%s]", st.Name, ptr.Deref(st.ResourceClaimName, "<none>"))
			}
		}
		b.WriteString("\n")
	}
	claims, _ := s.ResourceClaims().List()
	for _, c := range claims {
		fmt.Fprintf(&b, "claim %s %s owners=%v annotations=%v labels=%v finalizers=%v spec=%+v reserved=%v %s\n", c.Name, c.UID,
			ownerNames(c.OwnerReferences), c.Annotations, c.Labels, c.Finalizers, jsonOf(t, c.Spec), c.Status.ReservedFor, claimAllocation(c))
	}
	sl, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	for _, x := range sl {
		fmt.Fprintf(&b, "slice %s %s/%s\n", x.Name, x.Spec.Driver, x.Spec.Pool.Name)
	}
	state, _ := s.ResourceClaims().GatherAllocatedState()
	ids := make([]string, 0, len(state.AllocatedDevices))
	for id := range state.AllocatedDevices {
		ids = append(ids, id.String())
	}
	slices.Sort(ids)
	fmt.Fprintf(&b, "allocated %v\n", ids)
	return b.String()
}

// claimAllocation renders an allocation without share IDs, which the
// allocator draws at random.
func claimAllocation(c *resourceapi.ResourceClaim) string {
	a := c.Status.Allocation
	if a == nil {
		return "unallocated"
	}
	var parts []string
	for _, r := range a.Devices.Results {
		parts = append(parts, fmt.Sprintf("%s:%s/%s/%s share=%v cap=%v admin=%v tol=%v bind=%v/%v", r.Request, r.Driver, r.Pool, r.Device,
			r.ShareID != nil, r.ConsumedCapacity, r.AdminAccess, r.Tolerations, r.BindingConditions, r.BindingFailureConditions))
	}
	sel := "<none>"
	if a.NodeSelector != nil {
		sel = a.NodeSelector.String()
	}
	return fmt.Sprintf("%v config=%v on %s at %v", parts, a.Devices.Config, sel, a.AllocationTimestamp)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ownerNames(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/%s/%s/%v", r.Kind, r.Name, r.UID, ptr.Deref(r.Controller, false)))
	}
	return out
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(al), len(bl))
}
