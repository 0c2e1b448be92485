package plan_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastnodes"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const gpuDriver = "gpu.example.com"

// env is a planner over a real scheduler framework and estimator.
type env struct {
	ctx     context.Context
	runner  *framework.Runner
	backoff *backoff.Backoff
	opts    plan.Options
	chain   expander.Chain
	conf    *config.Options
}

func newEnv(t *testing.T) *env {
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		ctx: ctx, runner: runner,
		backoff: backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour),
		opts:    plan.Options{MaxNodesPerScaleUp: 1000, ScaleUpFromZero: true},
		chain:   expander.Chain{leastwaste.New()},
		conf:    config.Default(),
	}
}

func (e *env) plan(t *testing.T, pods []*corev1.Pod, groups []*nodegroups.Info, usage limits.Usage) *plan.Plan {
	t.Helper()
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, err := p.Plan(e.ctx, pods, groups, usage, now)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return out
}

// group is a node group of cpu-CPU nodes, with target nodes requested.
func group(id, cpu string, max, target int) *nodegroups.Info {
	g := fakeprovider.NewGroup(id, 0, max)
	g.SetTarget(target)
	return &nodegroups.Info{Group: g, Id: id, Max: max, Target: target, TemplateSource: "provider",
		Template: &cloudprovider.NodeTemplate{Node: builder.Node(template.PlaceholderNodeName).CPU(cpu).Memory("64Gi").Label("group", id).Obj()}}
}

func cpuPods(prefix, cpu string, n int) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = builder.Pod("ns", fmt.Sprintf("%s-%d", prefix, i)).CPU(cpu).Memory("1Gi").OwnedBy("apps/v1", "ReplicaSet", prefix).Obj()
	}
	return out
}

// scaleUps renders the plan's scale-ups as "group+delta: pods".
func scaleUps(p *plan.Plan) []string {
	var out []string
	for _, up := range p.ScaleUps {
		s := fmt.Sprintf("%s+%d:", up.Group.Id, up.Delta)
		for _, pod := range up.Pods {
			s += " " + pod.Name
		}
		out = append(out, s)
	}
	return out
}

func TestPlanPicksTheExpandersChoice(t *testing.T) {
	tests := []struct {
		name  string
		chain expander.Chain
		want  []string
	}{
		// 4 pods of 2 CPUs: 2 small nodes, full, or 1 big node, 3/4 idle.
		{"least-waste", expander.Chain{leastwaste.New()}, []string{"small+2: web-0 web-1 web-2 web-3"}},
		{"least-nodes", expander.Chain{leastnodes.New()}, []string{"big+1: web-0 web-1 web-2 web-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.chain = tc.chain
			p := e.plan(t, cpuPods("web", "2", 4), []*nodegroups.Info{group("big", "32", 10, 0), group("small", "4", 10, 0)}, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			if len(p.NotHelped) != 0 {
				t.Errorf("not helped: %v", p.NotHelped)
			}
		})
	}
}

func TestPlanReasons(t *testing.T) {
	tests := []struct {
		name      string
		group     *nodegroups.Info
		pods      []*corev1.Pod
		setup     func(*env)
		usage     limits.Usage
		wantUps   []string
		wantLeft  []string
		wantGroup string // the reason of the group for every pod left
	}{{
		name:      "group at its max size",
		group:     group("g", "4", 2, 2),
		pods:      cpuPods("web", "1", 2),
		wantLeft:  []string{"web-0", "web-1"},
		wantGroup: limits.ReasonGroupMax,
	}, {
		name:      "max-nodes-total reached",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("web", "1", 1),
		setup:     func(e *env) { e.conf.MaxNodesTotal = 5 },
		usage:     limits.Usage{Nodes: 5},
		wantLeft:  []string{"web-0"},
		wantGroup: limits.ReasonMaxNodesTotal,
	}, {
		name:      "backed off",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("web", "1", 1),
		setup:     func(e *env) { e.backoff.Fail("g", "timeout", now.Add(-time.Minute)) },
		wantLeft:  []string{"web-0"},
		wantGroup: plan.ReasonBackoff,
	}, {
		name: "no template",
		group: func() *nodegroups.Info {
			g := group("g", "4", 10, 0)
			g.Template, g.TemplateErr = nil, errors.New("no healthy node")
			return g
		}(),
		pods:      cpuPods("web", "1", 1),
		wantLeft:  []string{"web-0"},
		wantGroup: plan.ReasonNoTemplate,
	}, {
		name:      "scale-up from zero disabled",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("web", "1", 1),
		setup:     func(e *env) { e.opts.ScaleUpFromZero = false },
		wantLeft:  []string{"web-0"},
		wantGroup: plan.ReasonFromZero,
	}, {
		name:      "fits no template: the rejecting scheduler plugin",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("huge", "64", 2),
		wantLeft:  []string{"huge-0", "huge-1"},
		wantGroup: names.NodeResourcesFit,
	}, {
		name:      "max-nodes-total caps the scale-up",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("web", "3", 3),
		setup:     func(e *env) { e.conf.MaxNodesTotal = 7 },
		usage:     limits.Usage{Nodes: 5},
		wantUps:   []string{"g+2: web-0 web-1"},
		wantLeft:  []string{"web-2"},
		wantGroup: limits.ReasonMaxNodesTotal,
	}, {
		name:      "max-nodes-per-scaleup caps the scale-up",
		group:     group("g", "4", 10, 0),
		pods:      cpuPods("web", "3", 2),
		setup:     func(e *env) { e.opts.MaxNodesPerScaleUp = 1 },
		wantUps:   []string{"g+1: web-0"},
		wantLeft:  []string{"web-1"},
		wantGroup: "max-nodes-per-scaleup",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			p := e.plan(t, tc.pods, []*nodegroups.Info{tc.group}, tc.usage)
			if diff := cmp.Diff(tc.wantUps, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			var left []string
			for _, pod := range p.NotHelped {
				left = append(left, pod.Name)
				rs := p.Reasons[pod.UID]
				if len(rs) != 1 || rs[0].Group != "g" || rs[0].Reason != tc.wantGroup {
					t.Errorf("pod %s: reasons %v, want g: %s", pod.Name, rs, tc.wantGroup)
				}
			}
			if diff := cmp.Diff(tc.wantLeft, left); diff != "" {
				t.Errorf("not helped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanDifferentHardwareTwoScaleUps(t *testing.T) {
	e := newEnv(t)
	snap := e.runner.Snapshot()
	if err := snap.SetDeviceClass(builder.DeviceClass("gpu").Driver(gpuDriver).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "one-gpu").Request(builder.Request("gpu", "gpu")).Obj()); err != nil {
		t.Fatal(err)
	}
	cpu := group("cpu", "8", 10, 0)
	gpu := group("gpu", "8", 10, 0)
	gpu.Template.Node.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	gpu.Template.ResourceSlices = []*resourceapi.ResourceSlice{
		builder.ResourceSlice("gpus", template.PlaceholderNodeName, gpuDriver, template.PlaceholderNodeName).
			Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj(),
	}
	var pods []*corev1.Pod
	for i := range 2 {
		pods = append(pods,
			builder.Pod("ns", fmt.Sprintf("train-%d", i)).CPU("1").ClaimFromTemplate("gpu", "one-gpu").
				Toleration("nvidia.com/gpu", "", corev1.TaintEffectNoSchedule).Obj(),
			builder.Pod("ns", fmt.Sprintf("web-%d", i)).CPU("1").Obj())
	}

	p := e.plan(t, pods, []*nodegroups.Info{cpu, gpu}, limits.Usage{})
	// least-waste: the gpu node is fully used (devices count), so it goes first.
	want := []string{"gpu+1: train-0 train-1", "cpu+1: web-0 web-1"}
	if diff := cmp.Diff(want, scaleUps(p)); diff != "" {
		t.Errorf("scale-ups (-want +got):\n%s", diff)
	}
	if len(p.NotHelped) != 0 {
		t.Errorf("not helped: %v", p.NotHelped)
	}
}

func TestPlanReasonsPerGroup(t *testing.T) {
	e := newEnv(t)
	e.backoff.Fail("cooling", "timeout", now)
	full := group("full", "4", 1, 1)
	cooling := group("cooling", "4", 10, 0)
	tiny := group("tiny", "1", 10, 0)
	pod := cpuPods("web", "2", 1)
	p := e.plan(t, pod, []*nodegroups.Info{tiny, full, cooling}, limits.Usage{})
	if len(p.ScaleUps) != 0 || len(p.NotHelped) != 1 {
		t.Fatalf("scale-ups %v, not helped %d; want none and the pod", scaleUps(p), len(p.NotHelped))
	}
	got := map[string]string{}
	for _, r := range p.Reasons[pod[0].UID] {
		got[r.Group] = r.Reason
	}
	want := map[string]string{"full": limits.ReasonGroupMax, "cooling": plan.ReasonBackoff, "tiny": names.NodeResourcesFit}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}

// A group that scales to its max size at once (zeroOrMaxNodeScaling)
// gets every node it has room for in one all-or-nothing request, its
// planned pods on the first; when the limits do not allow that many, it
// is not an option and says why.
func TestPlanZeroOrMax(t *testing.T) {
	tests := []struct {
		name       string
		max        int
		total      int // --max-nodes-total (0: none)
		want       []string
		wantAtomic bool
		reason     string
	}{
		{name: "to its max", max: 4, want: []string{"block+4: web-0 web-1"}, wantAtomic: true},
		{name: "the limits allow fewer", max: 4, total: 3, reason: plan.ReasonZeroOrMax},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.conf.MaxNodesTotal = tc.total
			g := group("block", "4", tc.max, 0)
			g.Options.ZeroOrMaxNodeScaling = true
			p := e.plan(t, cpuPods("web", "3", 2), []*nodegroups.Info{g}, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			if len(p.ScaleUps) == 1 {
				up := p.ScaleUps[0]
				if up.Atomic != tc.wantAtomic || len(up.Nodes) != up.Delta || len(up.Nodes[0]) != 1 || len(up.Nodes[3]) != 0 {
					t.Errorf("atomic %v, nodes %v; want atomic %v and the pods on the first nodes", up.Atomic, up.Nodes, tc.wantAtomic)
				}
			}
			if tc.reason != "" {
				wantReason(t, p, tc.reason)
			}
		})
	}
}

// A group of units of 4 grows in whole units, in one all-or-nothing
// request, the pods on the first nodes and the rest of the unit empty;
// room of less than a unit is none.
func TestPlanWholeUnits(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		total  int // --max-nodes-total (0: none)
		pods   int
		want   []string
		reason string
	}{
		{name: "one unit for two nodes", max: 8, pods: 2, want: []string{"racks+4: web-0 web-1"}},
		{name: "two units for five nodes", max: 8, pods: 5, want: []string{"racks+8: web-0 web-1 web-2 web-3 web-4"}},
		{name: "the limits allow less than a unit", max: 8, total: 3, pods: 2, reason: plan.ReasonUnitSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.conf.MaxNodesTotal = tc.total
			g := group("racks", "4", tc.max, 0)
			g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationUnitSize: "4"}
			p := e.plan(t, cpuPods("web", "3", tc.pods), []*nodegroups.Info{g}, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
			for _, up := range p.ScaleUps {
				if !up.Atomic || len(up.Nodes) != up.Delta || len(up.Nodes[up.Delta-1]) != 0 {
					t.Errorf("atomic %v, nodes %v; want atomic, the pods first, the unit's last node empty", up.Atomic, up.Nodes)
				}
			}
			if tc.reason != "" {
				wantReason(t, p, tc.reason)
			}
		})
	}
}

// Pods that need some clique, not a given one, in a group whose provider
// picks each unit's: a pod whose node affinity only asks that the label
// exist, and pods that follow each other into one clique (required pod
// affinity, as a ComputeDomain's pods are written) go onto new units,
// those following each other into one unit only.
func TestPlanPodsNeedingAClique(t *testing.T) {
	const clique = "nvidia.com/gpu.clique"
	exists := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: clique, Operator: corev1.NodeSelectorOpExists}}}}}}}
	follow := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"domain": "cd"}}, TopologyKey: clique}}}}
	tests := []struct {
		name     string
		affinity *corev1.Affinity
		pods     int
		want     []string
	}{
		{"the label exists", exists, 2, []string{"racks+4: cd-0 cd-1"}},
		{"following each other", follow, 3, []string{"racks+4: cd-0 cd-1 cd-2"}},
		{"more than a unit following each other", follow, 5, []string{"racks+4: cd-0 cd-1 cd-2 cd-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := group("racks", "4", 16, 0)
			g.Template.Node.Annotations = map[string]string{cloudprovider.AnnotationTopologyPerRequest: clique, cloudprovider.AnnotationUnitSize: "4"}
			var pods []*corev1.Pod
			for i := range tc.pods {
				pods = append(pods, builder.Pod("ns", fmt.Sprintf("cd-%d", i)).CPU("3").Label("domain", "cd").Obj())
				pods[i].Spec.Affinity = tc.affinity
			}
			p := e.plan(t, pods, []*nodegroups.Info{g}, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
		})
	}
}

// A group of racks whose provider picks each rack's clique, its template
// read off a node of clique "rack-a": a pod whose IMEX channel must be in
// rack-a (it joins a ComputeDomain running there) gets no new rack, whose
// channels will carry a clique of their own; a pod wanting a channel of
// any clique gets one.
func TestPlanChannelsOfANewUnit(t *testing.T) {
	const clique, channels = "nvidia.com/gpu.clique", "compute-domain.example.com"
	running := builder.Node("rack-a-0").CPU("4").Memory("64Gi").Label(clique, "rack-a").Obj()
	tmpl, err := template.FromNode(running, []*resourceapi.ResourceSlice{
		builder.ResourceSlice("channels", running.Name, channels, running.Name).
			Devices(builder.Device("channel-0").Attr("clique", "rack-a"), builder.Device("channel-1").Attr("clique", "rack-a")).Obj(),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.KeepLaunchChoices(&cloudprovider.NodeTemplate{Node: builder.Node("declared").
		Annotation(cloudprovider.AnnotationTopologyPerRequest, clique).Annotation(cloudprovider.AnnotationUnitSize, "4").Obj()})
	tests := []struct {
		name     string
		selector string
		want     []string
	}{
		{"a channel of any clique", "", []string{"racks+4: cd-0"}},
		{"a channel of rack-a", `device.attributes["` + channels + `"].clique == "rack-a"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			snap := e.runner.Snapshot()
			if err := snap.SetDeviceClass(builder.DeviceClass("channel").Driver(channels).Obj()); err != nil {
				t.Fatal(err)
			}
			req := builder.Request("channel", "channel")
			if tc.selector != "" {
				req = req.Selector(tc.selector)
			}
			if err := snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "channel").Request(req).Obj()); err != nil {
				t.Fatal(err)
			}
			g := group("racks", "4", 8, 0)
			g.Template = tmpl
			pod := builder.Pod("ns", "cd-0").CPU("1").ClaimFromTemplate("channel", "channel").Obj()
			p := e.plan(t, []*corev1.Pod{pod}, []*nodegroups.Info{g}, limits.Usage{})
			if diff := cmp.Diff(tc.want, scaleUps(p)); diff != "" {
				t.Errorf("scale-ups (-want +got):\n%s", diff)
			}
		})
	}
}

// wantReason fails t unless the plan's first pod no group helps has
// reason among its reasons.
func wantReason(t *testing.T, p *plan.Plan, reason string) {
	t.Helper()
	var got []string
	for _, r := range p.Reasons[p.NotHelped[0].UID] {
		got = append(got, r.Reason)
	}
	if !slices.Contains(got, reason) {
		t.Errorf("reasons %v, want %s", got, reason)
	}
}
