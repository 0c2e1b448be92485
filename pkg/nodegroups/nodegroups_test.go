package nodegroups_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestRestrict(t *testing.T) {
	groups := fakeprovider.New(fakeprovider.NewGroup("gpu", 0, 8), fakeprovider.NewGroup("cpu", 1, 5)).NodeGroups()
	tests := []struct {
		name      string
		specs     []config.NodeGroupSpec
		wantIDs   []string
		wantSizes map[string]config.NodeGroupSpec
		wantErr   []string
	}{{
		name:    "no --nodes keeps every group with the provider's sizes",
		wantIDs: []string{"gpu", "cpu"},
		wantSizes: map[string]config.NodeGroupSpec{
			"gpu": {Name: "gpu", Min: 0, Max: 8},
			"cpu": {Name: "cpu", Min: 1, Max: 5},
		},
	}, {
		name:      "--nodes keeps the named groups, in its order, with its sizes",
		specs:     []config.NodeGroupSpec{{Name: "cpu", Min: 0, Max: 2}},
		wantIDs:   []string{"cpu"},
		wantSizes: map[string]config.NodeGroupSpec{"cpu": {Name: "cpu", Min: 0, Max: 2}},
	}, {
		name:    "an unknown name is an error that lists the known ones",
		specs:   []config.NodeGroupSpec{{Name: "gpu", Max: 1}, {Name: "tpu", Max: 1}},
		wantErr: []string{"--nodes", `"tpu"`, "[cpu gpu]"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, sizes, err := nodegroups.Restrict(groups, tc.specs)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range got {
				ids = append(ids, g.Id())
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSizes, sizes); diff != "" {
				t.Errorf("sizes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpcomingAndSize(t *testing.T) {
	nodes := func(n int) []*corev1.Node { return make([]*corev1.Node, n) }
	tests := []struct {
		name                   string
		info                   nodegroups.Info
		wantUpcoming, wantSize int
	}{
		{"empty", nodegroups.Info{}, 0, 0},
		{"requested, none registered", nodegroups.Info{Target: 3}, 3, 3},
		{"some ready, some booting", nodegroups.Info{Target: 5, Ready: nodes(2), Booting: nodes(1)}, 2, 5},
		{"more registered than targeted", nodegroups.Info{Target: 1, Ready: nodes(2), Booting: nodes(1)}, 0, 3},
	}
	for _, tc := range tests {
		if got := tc.info.Upcoming(); got != tc.wantUpcoming {
			t.Errorf("%s: Upcoming() = %d, want %d", tc.name, got, tc.wantUpcoming)
		}
		if got := tc.info.Size(); got != tc.wantSize {
			t.Errorf("%s: Size() = %d, want %d", tc.name, got, tc.wantSize)
		}
	}
}

// inGroup is a node labelled as a member of group.
func inGroup(name, group string) *builder.NodeBuilder {
	return builder.Node(name).Label(fakeprovider.GroupLabel, group)
}

func gpuSlice(node string) *resourceapi.ResourceSlice {
	return builder.ResourceSlice(node+"-gpus", node, "gpu.example.com", node).Devices(builder.Device("gpu-0")).Obj()
}

func TestCollect(t *testing.T) {
	gpuTemplate := &cloudprovider.NodeTemplate{
		Node:           builder.Node(template.PlaceholderNodeName).CPU("64").Label("accelerator", "gpu").Obj(),
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice(template.PlaceholderNodeName)},
	}
	cpuTemplate := &cloudprovider.NodeTemplate{Node: builder.Node(template.PlaceholderNodeName).CPU("8").Obj()}

	// The gpu group's template has devices: its nodes are ready only once
	// they publish slices.
	gpu := fakeprovider.NewGroup("gpu", 0, 10).WithTemplate(gpuTemplate, nil)
	gpu.SetTarget(5)
	// The cpu group's template has none.
	cpu := fakeprovider.NewGroup("cpu", 1, 4).WithTemplate(cpuTemplate, nil)
	cpu.SetTarget(2)
	// The broken group has neither a healthy node nor a provider template.
	broken := fakeprovider.NewGroup("broken", 0, 3).WithTemplate(nil, errors.New("no such machine type"))
	broken.SetTarget(1)
	// The unused group is known to the provider but not scaled (--nodes).
	unused := fakeprovider.NewGroup("unused", 0, 3)
	provider := fakeprovider.New(gpu, cpu, broken, unused)
	provider.NodeGroupForNodeErr = map[string]error{"gpu-mystery": errors.New("API down")}

	nodes := []*corev1.Node{
		inGroup("gpu-ready", "gpu").Obj(),
		inGroup("gpu-no-slices", "gpu").Obj(),
		inGroup("gpu-not-ready", "gpu").NotReady().Obj(),
		inGroup("gpu-mystery", "gpu").Obj(),
		inGroup("cpu-cordoned", "cpu").Unschedulable().Obj(),
		inGroup("broken-booting", "broken").NotReady().Obj(),
		inGroup("unused-1", "unused").Obj(),
		builder.Node("no-group").Obj(),
	}
	slices := map[string][]*resourceapi.ResourceSlice{
		"gpu-ready":     {gpuSlice("gpu-ready")},
		"gpu-not-ready": {gpuSlice("gpu-not-ready")},
	}
	in := nodegroups.CollectInput{
		Groups:       []cloudprovider.NodeGroup{gpu, cpu, broken},
		Sizes:        map[string]config.NodeGroupSpec{"gpu": {Name: "gpu", Min: 0, Max: 6}, "cpu": {Name: "cpu", Min: 1, Max: 4}, "broken": {Name: "broken", Max: 3}},
		Provider:     provider,
		Nodes:        nodes,
		SlicesByNode: slices,
	}
	_, ctx := ktesting.NewTestContext(t)
	infos, err := nodegroups.Collect(ctx, in, nodegroups.Templates{})
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Id                  string
		Min, Max, Target    int
		Ready, Booting      []string
		TemplateSource      string
		HasTemplate, HasErr bool
		Upcoming            int
	}
	names := func(ns []*corev1.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	var got []view
	for _, i := range infos {
		got = append(got, view{i.Id, i.Min, i.Max, i.Target, names(i.Ready), names(i.Booting),
			i.TemplateSource, i.Template != nil, i.TemplateErr != nil, i.Upcoming()})
	}
	want := []view{
		// A ready node without slices in a group with devices is booting;
		// the template comes from the healthy node.
		{Id: "gpu", Max: 6, Target: 5, Ready: []string{"gpu-ready"}, Booting: []string{"gpu-no-slices", "gpu-not-ready"},
			TemplateSource: "node/gpu-ready", HasTemplate: true, Upcoming: 2},
		// A cordoned node is ready but no model: the provider's template.
		{Id: "cpu", Min: 1, Max: 4, Target: 2, Ready: []string{"cpu-cordoned"}, TemplateSource: "provider", HasTemplate: true, Upcoming: 1},
		{Id: "broken", Max: 3, Target: 1, Booting: []string{"broken-booting"}, HasErr: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Collect (-want +got):\n%s", diff)
	}
	// The template from a node is that node, sanitised: the placeholder
	// name, its devices.
	g := infos[0].Template
	if g.Node.Name != template.PlaceholderNodeName || g.Node.Labels[fakeprovider.GroupLabel] != "gpu" || len(g.ResourceSlices) != 1 {
		t.Errorf("gpu template = node %s labels %v, %d slices; want the sanitised gpu-ready", g.Node.Name, g.Node.Labels, len(g.ResourceSlices))
	}
	if !strings.Contains(infos[2].TemplateErr.Error(), "no such machine type") {
		t.Errorf("TemplateErr = %v, want the provider's error", infos[2].TemplateErr)
	}
}

// failingFromNode fails FromNode for the named nodes and otherwise does
// what the real builder does.
type failingFromNode struct {
	nodegroups.Templates
	fail map[string]bool
}

func (f failingFromNode) FromNode(ctx context.Context, node *corev1.Node, s []*resourceapi.ResourceSlice, p []*corev1.Pod) (*cloudprovider.NodeTemplate, error) {
	if f.fail[node.Name] {
		return nil, errors.New("unusable")
	}
	return f.Templates.FromNode(ctx, node, s, p)
}

func (f failingFromNode) FromProvider(ctx context.Context, t *cloudprovider.NodeTemplate, ds []*appsv1.DaemonSet) (*cloudprovider.NodeTemplate, error) {
	return f.Templates.FromProvider(ctx, t, ds)
}

func TestCollectTemplateFallbacks(t *testing.T) {
	provided := &cloudprovider.NodeTemplate{Node: builder.Node(template.PlaceholderNodeName).CPU("8").Obj()}
	tests := []struct {
		name       string
		nodes      []*corev1.Node
		provider   *cloudprovider.NodeTemplate
		fail       map[string]bool
		wantSource string
		wantErr    bool
	}{
		{"first usable ready node", []*corev1.Node{inGroup("a", "g").Obj(), inGroup("b", "g").Obj()}, provided, nil, "node/a", false},
		// The informers list nodes in no order: the first by name, so
		// every pass takes the same node (the differential test found
		// plans that changed from pass to pass with the listing order).
		{"first by name, whatever the listing order", []*corev1.Node{inGroup("b", "g").Obj(), inGroup("c", "g").Obj(), inGroup("a", "g").Obj()}, provided, nil, "node/a", false},
		{"a node that cannot be a template is skipped", []*corev1.Node{inGroup("a", "g").Obj(), inGroup("b", "g").Obj()}, provided, map[string]bool{"a": true}, "node/b", false},
		{"no usable node: the provider's", []*corev1.Node{inGroup("a", "g").Obj()}, provided, map[string]bool{"a": true}, "provider", false},
		{"a booting node is never the template", []*corev1.Node{inGroup("a", "g").NotReady().Obj()}, provided, nil, "provider", false},
		{"no node and no provider template", nil, nil, nil, "", true},
		{"a node without a provider template", []*corev1.Node{inGroup("a", "g").Obj()}, nil, nil, "node/a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			g := fakeprovider.NewGroup("g", 0, 5).WithTemplate(tc.provider, nil)
			infos, err := nodegroups.Collect(ctx, nodegroups.CollectInput{
				Groups: []cloudprovider.NodeGroup{g}, Provider: fakeprovider.New(g), Nodes: tc.nodes,
			}, failingFromNode{fail: tc.fail})
			if err != nil {
				t.Fatal(err)
			}
			info := infos[0]
			if info.TemplateSource != tc.wantSource || (info.TemplateErr != nil) != tc.wantErr || (info.Template == nil) != tc.wantErr {
				t.Errorf("template source %q err %v, want %q (error: %v)", info.TemplateSource, info.TemplateErr, tc.wantSource, tc.wantErr)
			}
		})
	}
}

// A TargetSize that fails fails the pass (the size is unknown); one the
// provider calls an invalid answer leaves only that group out, and its
// nodes belong to no group.
func TestCollectTargetSizeError(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantErr  bool
		wantInfo []string
	}{
		{"no answer fails the pass", errors.New("throttled"), true, nil},
		{"an invalid answer skips the group", fmt.Errorf("negative target size -1: %w", cloudprovider.ErrInvalidAnswer), false, []string{"cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpu, cpu := fakeprovider.NewGroup("gpu", 0, 5), fakeprovider.NewGroup("cpu", 0, 5)
			gpu.Fail("TargetSize", tc.err)
			_, ctx := ktesting.NewTestContext(t)
			infos, err := nodegroups.Collect(ctx, nodegroups.CollectInput{
				Groups: []cloudprovider.NodeGroup{gpu, cpu}, Provider: fakeprovider.New(gpu, cpu),
				Nodes: []*corev1.Node{inGroup("gpu-1", "gpu").Obj(), inGroup("cpu-1", "cpu").Obj()},
			}, nodegroups.Templates{})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "gpu") || !strings.Contains(err.Error(), "throttled") {
					t.Errorf("Collect error = %v, want one naming the group and the cause", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, i := range infos {
				ids = append(ids, i.Id)
				for _, n := range append(i.Ready, i.Booting...) {
					if n.Name == "gpu-1" {
						t.Errorf("the skipped group's node is in group %s", i.Id)
					}
				}
			}
			if !slices.Equal(ids, tc.wantInfo) {
				t.Errorf("groups %v, want %v", ids, tc.wantInfo)
			}
		})
	}
}

func TestUsable(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{gpuSlice("n")}
	expected := []*resourceapi.ResourceSlice{gpuSlice("template")}
	slice := func(name, driver string, gen, count int64) *resourceapi.ResourceSlice {
		return builder.ResourceSlice(name, "n", driver, "n").Pool(gen, count).Devices(builder.Device(name)).Obj()
	}
	tests := []struct {
		name     string
		node     *corev1.Node
		expected []*resourceapi.ResourceSlice
		slices   []*resourceapi.ResourceSlice
		want     string // "" for usable
	}{
		{"ready, no devices expected", builder.Node("n").Obj(), nil, nil, ""},
		{"not ready", builder.Node("n").NotReady().Obj(), nil, nil, "node is not Ready"},
		{"no Ready condition", func() *corev1.Node { n := builder.Node("n").Obj(); n.Status.Conditions = nil; return n }(), nil, nil, "node is not Ready"},
		{"ready, devices expected, none published", builder.Node("n").Obj(), expected, nil, "driver gpu.example.com: no ResourceSlice published"},
		{"ready, devices published", builder.Node("n").Obj(), expected, slices, ""},
		{"not ready, devices published", builder.Node("n").NotReady().Obj(), expected, slices, "node is not Ready"},
		{"ready, not-ready taint not lifted yet", builder.Node("n").Taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule).Obj(), expected, slices,
			"node still has the start-up taint node.kubernetes.io/not-ready"},
		{"unreachable", builder.Node("n").Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoExecute).Obj(), nil, nil,
			"node still has the start-up taint node.kubernetes.io/unreachable"},
		{"upstream start-up taint", builder.Node("n").Taint("startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver", "", corev1.TaintEffectNoSchedule).Obj(), nil, nil,
			"node still has the start-up taint startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver"},
		{"a user's taint is not a start-up taint", builder.Node("n").Taint("dedicated", "training", corev1.TaintEffectNoSchedule).Obj(), nil, nil, ""},
		{"incomplete pool: 1 of 3 slices", builder.Node("n").Obj(), expected,
			[]*resourceapi.ResourceSlice{slice("a", "gpu.example.com", 1, 3)}, "driver gpu.example.com: pool n has 1 of 3 slices"},
		{"complete pool of 2", builder.Node("n").Obj(), expected,
			[]*resourceapi.ResourceSlice{slice("a", "gpu.example.com", 1, 2), slice("b", "gpu.example.com", 1, 2)}, ""},
		{"old generation does not count toward the new one", builder.Node("n").Obj(), expected,
			[]*resourceapi.ResourceSlice{slice("a", "gpu.example.com", 1, 2), slice("b", "gpu.example.com", 2, 2)}, "driver gpu.example.com: pool n has 1 of 2 slices"},
		{"another driver's slices do not stand in", builder.Node("n").Obj(), expected,
			[]*resourceapi.ResourceSlice{slice("a", "nic.example.com", 1, 1)}, "driver gpu.example.com: no ResourceSlice published"},
		{"second expected driver missing", builder.Node("n").Obj(),
			[]*resourceapi.ResourceSlice{gpuSlice("template"), builder.ResourceSlice("t-nic", "template", "nic.example.com", "template").Obj()},
			slices, "driver nic.example.com: no ResourceSlice published"},
	}
	for _, tc := range tests {
		ok, why := nodegroups.Usable(tc.node, tc.expected, tc.slices)
		if ok != (tc.want == "") || why != tc.want {
			t.Errorf("%s: Usable = %v, %q, want %q", tc.name, ok, why, tc.want)
		}
	}
}

// A Ready node whose driver's pool stays incomplete and unchanged for the
// pool stall time is no longer coming capacity: stale, with the stalled
// driver and pool named. Its slices' own times (as the API server stamped
// them) tell the change, so a restarted process judges it alike.
func TestCollectStalledPools(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	gpuTemplate := &cloudprovider.NodeTemplate{
		Node:           builder.Node(template.PlaceholderNodeName).CPU("64").Obj(),
		ResourceSlices: []*resourceapi.ResourceSlice{gpuSlice(template.PlaceholderNodeName)},
	}
	partial := func(node string, age time.Duration) *resourceapi.ResourceSlice {
		s := builder.ResourceSlice(node+"-0", node, "gpu.example.com", node).Pool(1, 3).Obj()
		s.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return s
	}
	node := func(name string, age time.Duration) *corev1.Node {
		n := inGroup(name, "gpu").Obj()
		n.CreationTimestamp = metav1.NewTime(now.Add(-age))
		n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-age))
		return n
	}
	gpu := fakeprovider.NewGroup("gpu", 0, 10).WithTemplate(gpuTemplate, nil)
	gpu.SetTarget(4)
	in := nodegroups.CollectInput{
		Groups:   []cloudprovider.NodeGroup{gpu},
		Sizes:    map[string]config.NodeGroupSpec{"gpu": {Name: "gpu", Max: 10}},
		Provider: fakeprovider.New(gpu),
		Nodes: []*corev1.Node{node("stalled", 10*time.Minute), node("publishing", 10*time.Minute), node("silent", 10*time.Minute),
			node("fresh", time.Minute)},
		SlicesByNode: map[string][]*resourceapi.ResourceSlice{
			"stalled":    {partial("stalled", 9*time.Minute)},
			"publishing": {partial("publishing", time.Minute)},
		},
		Now: now, Defaults: cloudprovider.NodeGroupAutoscalingOptions{MaxNodeProvisionTime: time.Hour}, PoolStall: 5 * time.Minute,
	}
	_, ctx := ktesting.NewTestContext(t)
	infos, err := nodegroups.Collect(ctx, in, nodegroups.Templates{})
	if err != nil {
		t.Fatal(err)
	}
	g := infos[0]
	if want := map[string]bool{"stalled": true, "silent": true}; !cmp.Equal(want, g.Stale) {
		t.Errorf("stale %v, want %v", g.Stale, want)
	}
	got := map[string]string{}
	for name, sp := range g.Stalled {
		got[name] = sp.Driver + "/" + sp.Pool + ": " + sp.Why
	}
	want := map[string]string{
		"stalled": "gpu.example.com/stalled: driver gpu.example.com: pool stalled has 1 of 3 slices",
		"silent":  "gpu.example.com/: driver gpu.example.com: no ResourceSlice published",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stalled (-want +got):\n%s", diff)
	}
}
