package buffers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastwaste"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	ns     = "team"
	driver = "gpu.example.com"
	class  = "gpu"
)

// now is a Monday, 12:00 UTC.
var now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func buffer(name string, spec v1beta1.CapacityBufferSpec, ann map[string]string) *unstructured.Unstructured {
	b := &v1beta1.CapacityBuffer{TypeMeta: metav1.TypeMeta{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1, Annotations: ann}, Spec: spec}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// shapedBy is a buffer with neither ref whose status names a PodTemplate,
// as a controller of the user's writes it for upstream's.
func shapedBy(u *unstructured.Unstructured, tmpl string) *unstructured.Unstructured {
	if err := unstructured.SetNestedField(u.Object, tmpl, "status", "podTemplateRef", "name"); err != nil {
		panic(err)
	}
	return u
}

func limitsOnly(kv ...string) v1beta1.CapacityBufferSpec {
	l := v1beta1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1beta1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return v1beta1.CapacityBufferSpec{Limits: &l}
}

func fromTemplate(tmpl string, replicas int32) v1beta1.CapacityBufferSpec {
	return v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: tmpl}, Replicas: ptr.To(replicas)}
}

func podTemplate(name string, pod *corev1.Pod) *corev1.PodTemplate {
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3},
		Template: corev1.PodTemplateSpec{Spec: pod.Spec}}
}

type env struct {
	ctx    context.Context
	runner *framework.Runner
	proc   *buffers.Manager
	src    *buffers.Listers
	in     buffers.RunInput
}

// newEnv is a processor over a real scheduler framework and planner, the
// objects in the snapshot, groups g.
func newEnv(t *testing.T, bufs []*unstructured.Unstructured, kube []runtime.Object, groups []*nodegroups.Info, objs ...any) *env {
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, runner.Snapshot(), objs...)
	var nodes []string
	var claimTemplates []*resourceapi.ResourceClaimTemplate
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, o.Name)
		case *resourceapi.ResourceClaimTemplate:
			claimTemplates = append(claimTemplates, o)
		}
	}
	tmpls := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	quotas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range kube {
		switch o := o.(type) {
		case *corev1.PodTemplate:
			_ = tmpls.Add(o)
		case *corev1.ResourceQuota:
			_ = quotas.Add(o)
		}
	}
	src := &buffers.Listers{List: func() []*unstructured.Unstructured { return bufs },
		PodTemplates: corelisters.NewPodTemplateLister(tmpls), Quota: corelisters.NewResourceQuotaLister(quotas)}
	b := backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour)
	planner := plan.New(plan.Options{MaxNodesPerScaleUp: 1000, ScaleUpFromZero: true}, estimator.New(runner, estimator.Options{}),
		expander.Chain{leastwaste.New()}, limits.New(config.Default(), nil), b, nil)
	return &env{ctx: ctx, runner: runner, proc: buffers.New(src, nil, nil), src: src,
		in: buffers.RunInput{Runner: runner, Candidates: nodes, Planner: planner, Groups: groups, ClaimTemplates: claimTemplates, Now: now}}
}

func group(id string, node *corev1.Node, slices ...*resourceapi.ResourceSlice) *nodegroups.Info {
	return &nodegroups.Info{Group: fakeprovider.NewGroup(id, 0, 10), Id: id, Max: 10, TemplateSource: "provider",
		Template: &cloudprovider.NodeTemplate{Node: node, ResourceSlices: slices}}
}

func gpuSlice(node string, gpus int) *resourceapi.ResourceSlice {
	var devs []*builder.DeviceBuilder
	for i := range gpus {
		devs = append(devs, builder.Device(fmt.Sprintf("gpu-%d", i)))
	}
	return builder.ResourceSlice(node+"-gpus", node, driver, node).Devices(devs...).Obj()
}

// summary renders each buffer as "name replicas fit/planned/unplaced"
// and, when there are, "ready=n" (of fit) and "infeasible=n" (of
// unplaced).
func summary(out *buffers.PassOutcome) []string {
	var s []string
	for _, b := range out.Buffers {
		line := fmt.Sprintf("%s %d %d/%d/%d", b.Obj.Name, b.Replicas, b.Fit, b.Planned, b.Unplaced)
		if b.ReadyFit > 0 {
			line += fmt.Sprintf(" ready=%d", b.ReadyFit)
		}
		if b.Infeasible > 0 {
			line += fmt.Sprintf(" infeasible=%d", b.Infeasible)
		}
		if b.NotReady != "" {
			line += " " + b.NotReady
		}
		s = append(s, line)
	}
	return s
}

func TestRun(t *testing.T) {
	cpuPod := builder.Pod(ns, "x").CPU("1").Memory("1Gi").Obj()
	gpuPod := builder.Pod(ns, "x").CPU("1").ClaimFromTemplate("gpu", "one-gpu").Obj()
	n1 := builder.Node("n1").CPU("4").Memory("64Gi").Obj()
	busy := builder.Pod(ns, "real").CPU("3").Node("n1").Obj()
	cpuGroup := group("cpu", builder.Node(template.PlaceholderNodeName).CPU("4").Memory("64Gi").Obj())
	gpuNode := builder.Node("g1").CPU("16").Memory("64Gi").Obj()
	gpuTmplNode := builder.Node(template.PlaceholderNodeName).CPU("16").Memory("64Gi").Obj()
	gpuGroup := group("gpu", gpuTmplNode, gpuSlice(template.PlaceholderNodeName, 2))
	dra := []any{builder.DeviceClass(class).Driver(driver).Obj(), builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", class)).Obj()}
	full := group("cpu", builder.Node(template.PlaceholderNodeName).CPU("4").Memory("64Gi").Obj())
	full.Max = 0 // at its max: no room for now, not infeasible
	notReady := builder.Node("n1").CPU("4").Memory("64Gi").NotReady().Obj()
	quota := func(hard string) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpus"}}
		q.Status.Hard = corev1.ResourceList{class + ".deviceclass.resource.k8s.io/devices": resource.MustParse(hard)}
		return q
	}
	for _, tc := range []struct {
		name    string
		bufs    []*unstructured.Unstructured
		kube    []runtime.Object
		groups  []*nodegroups.Info
		objs    []any
		want    []string
		wantUps []string
		notYet  []string // candidates that are upcoming or booting
	}{
		{"fits what the real pods leave", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 1), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1, busy}, []string{"b 1 1/0/0 ready=1"}, nil, nil},
		{"the rest on a new node", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 3), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1, busy}, []string{"b 3 1/2/0 ready=1"}, []string{"cpu +1"}, nil},
		{"GPUs held by claims", []*unstructured.Unstructured{buffer("b", fromTemplate("gpu", 3), nil)},
			[]runtime.Object{podTemplate("gpu", gpuPod)}, []*nodegroups.Info{gpuGroup}, append([]any{gpuNode, gpuSlice("g1", 2)}, dra...),
			[]string{"b 3 2/1/0 ready=2"}, []string{"gpu +1"}, nil},
		{"device quota cuts replicas", []*unstructured.Unstructured{buffer("b", fromTemplate("gpu", 3), nil)},
			[]runtime.Object{podTemplate("gpu", gpuPod), quota("1")}, []*nodegroups.Info{gpuGroup}, append([]any{gpuNode, gpuSlice("g1", 2)}, dra...),
			[]string{"b 1 1/0/0 ready=1"}, nil, nil},
		{"no group can help", []*unstructured.Unstructured{buffer("b", fromTemplate("gpu", 1), nil)},
			[]runtime.Object{podTemplate("gpu", gpuPod)}, []*nodegroups.Info{cpuGroup}, append([]any{n1}, dra...), []string{"b 1 0/0/1 infeasible=1"}, nil, nil},
		{"no room for now", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 2), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{full}, []any{n1, busy}, []string{"b 2 1/0/1 ready=1"}, nil, nil},
		{"upcoming nodes are not ready", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 3), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 3 3/0/0"}, nil, []string{"n1"}},
		{"a node not Ready holds no ready replica", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 3), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{notReady}, []string{"b 3 3/0/0"}, nil, nil},
		{"outside its windows", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 3), map[string]string{v1beta1.ActiveWindowsAnnotation: "0 20 * * * for 2h"})},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 0 0/0/0"}, nil, nil},
		{"inside its windows", []*unstructured.Unstructured{buffer("b", fromTemplate("cpu", 3), map[string]string{v1beta1.ActiveWindowsAnnotation: "0 8 * * 1-5 for 10h"})},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 3 3/0/0 ready=3"}, nil, nil},
		{"missing template, other strategy", []*unstructured.Unstructured{buffer("b", fromTemplate("gone", 3), nil),
			buffer("other", v1beta1.CapacityBufferSpec{ProvisioningStrategy: ptr.To("example.com/passive"), PodTemplateRef: &v1beta1.LocalObjectRef{Name: "cpu"}, Replicas: ptr.To[int32](9)}, nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 0 0/0/0 PodTemplateNotFound"}, nil, nil},
		{"limits only: as many as fit them, of the status's template", []*unstructured.Unstructured{shapedBy(buffer("b", limitsOnly("cpu", "3500m"), nil), "cpu")},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 3 3/0/0 ready=3"}, nil, nil},
		{"limits only, no template named", []*unstructured.Unstructured{buffer("b", limitsOnly("cpu", "4"), nil)},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 0 0/0/0 NoPodTemplate"}, nil, nil},
		{"limits only, the status's template gone", []*unstructured.Unstructured{shapedBy(buffer("b", limitsOnly("cpu", "4"), nil), "gone")},
			[]runtime.Object{podTemplate("cpu", cpuPod)}, []*nodegroups.Info{cpuGroup}, []any{n1}, []string{"b 0 0/0/0 PodTemplateNotFound"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.bufs, tc.kube, tc.groups, tc.objs...)
			e.in.NotYet = map[string]bool{}
			for _, n := range tc.notYet {
				e.in.NotYet[n] = true
			}
			out, err := e.proc.Run(e.ctx, e.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(out); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("buffers %q, want %q", got, tc.want)
			}
			var ups []string
			for _, up := range out.ScaleUps {
				ups = append(ups, fmt.Sprintf("%s +%d", up.Group.Id, up.Delta))
				if len(up.Pods) != 0 {
					t.Errorf("scale-up of %s names buffer pods; they are not API objects", up.Group.Id)
				}
			}
			if strings.Join(ups, ",") != strings.Join(tc.wantUps, ",") {
				t.Errorf("scale-ups %q, want %q", ups, tc.wantUps)
			}
			// Placed buffer pods stay in the snapshot (scale-down must
			// find them room); each claims its own simulated device.
			for _, b := range out.Buffers {
				placed := 0
				for _, p := range b.Pods {
					if _, ok := e.runner.Snapshot().PlacedPod(p.Namespace, p.Name); ok {
						placed++
					}
					if !buffers.IsBufferPod(p) {
						t.Errorf("%s not recognised as a buffer pod", p.Name)
					}
				}
				if placed < b.Fit {
					t.Errorf("%s: %d pods in the snapshot, %d fit", b.Obj.Name, placed, b.Fit)
				}
			}
		})
	}
}
