package clusterapi

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// The capacity annotations of upstream's README, and what upstream makes
// of them.
func TestTemplateFromAnnotations(t *testing.T) {
	const p = "capacity.cluster-autoscaler.kubernetes.io/"
	for _, tc := range []struct {
		name     string
		group    *obj
		capacity corev1.ResourceList
		labels   map[string]string
		taints   []corev1.Taint
		err      string
		noCap    bool
		// unit and perRequest: the launch choices the template says.
		unit       int
		perRequest string
	}{
		{name: "readme: cpu, memory, disk, maxPods, GPUs", group: md("gpu").ann(p+"memory", "128G", p+"cpu", "16", p+"ephemeral-disk", "100Gi",
			p+"maxPods", "200", p+"gpu-type", "nvidia.com/gpu", p+"gpu-count", "2"),
			capacity: rl("cpu", "16", "memory", "128G", "ephemeral-storage", "100Gi", "pods", "200", "nvidia.com/gpu", "2")},
		{name: "pods default to 110", group: md("gpu").ann(p+"memory", "128G", p+"cpu", "16"), capacity: rl("cpu", "16", "memory", "128G", "pods", "110")},
		{name: "gpu-count without gpu-type adds no resource", group: md("gpu").ann(p+"memory", "1G", p+"cpu", "1", p+"gpu-count", "2"),
			capacity: rl("cpu", "1", "memory", "1G", "pods", "110")},
		{name: "readme: labels and taints", group: md("gpu").ann(p+"memory", "128G", p+"cpu", "16", p+"labels", "key1=value1,key2=value2",
			p+"taints", "key1=value1:NoSchedule,key2=value2:NoExecute"),
			capacity: rl("cpu", "16", "memory", "128G", "pods", "110"),
			labels:   map[string]string{"key1": "value1", "key2": "value2"},
			taints:   []corev1.Taint{{Key: "key1", Value: "value1", Effect: corev1.TaintEffectNoSchedule}, {Key: "key2", Value: "value2", Effect: corev1.TaintEffectNoExecute}}},
		{name: "readme: the annotation taint overrides the spec taint of the same key and effect", group: md("gpu").ann(p+"memory", "128G", p+"cpu", "16",
			p+"taints", "dedicated=gpu-override:NoSchedule").
			set([]any{map[string]any{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, map[string]any{"key": "team", "value": "a", "effect": "NoExecute"}},
				"spec", "template", "spec", "taints"),
			capacity: rl("cpu", "16", "memory", "128G", "pods", "110"),
			taints:   []corev1.Taint{{Key: "dedicated", Value: "gpu-override", Effect: corev1.TaintEffectNoSchedule}, {Key: "team", Value: "a", Effect: corev1.TaintEffectNoExecute}}},
		{name: "malformed labels and taints are skipped", group: md("gpu").ann(p+"memory", "1G", p+"cpu", "1", p+"labels", "ok=1,broken,=x",
			p+"taints", "a=b=c:NoSchedule,good:NoSchedule,bad key:NoSchedule"),
			capacity: rl("cpu", "1", "memory", "1G", "pods", "110"),
			labels:   map[string]string{"ok": "1"},
			taints:   []corev1.Taint{{Key: "good", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "Machine template labels Cluster API propagates", group: md("gpu").ann(p+"memory", "1G", p+"cpu", "1").
			set(map[string]any{"node-role.kubernetes.io/gpu": "", "sub.node.cluster.x-k8s.io/pool": "a", "app": "not-propagated"}, "spec", "template", "metadata", "labels"),
			capacity: rl("cpu", "1", "memory", "1G", "pods", "110"),
			labels:   map[string]string{"node-role.kubernetes.io/gpu": "", "sub.node.cluster.x-k8s.io/pool": "a"}},
		{name: "no capacity: not implemented, the group needs a real node", group: md("gpu"), noCap: true},
		{name: "cpu only", group: md("gpu").ann(p+"cpu", "4"), noCap: true},
		{name: "malformed quantity names the annotation", group: md("gpu").ann(p+"cpu", "four", p+"memory", "1G"), err: p + `cpu="four"`},
		{name: "malformed gpu-count: upstream's message", group: md("gpu").ann(p+"cpu", "1", p+"memory", "1G", p+"gpu-count", "2.5"),
			err: `value "2.5" from annotation "` + p + `gpu-count" expected to be an integer`},
		{name: "malformed maxPods", group: md("gpu").ann(p+"cpu", "1", p+"memory", "1G", p+"maxPods", "many"), err: "maxPods"},
		{name: "units of 4, one clique each", group: md("gpu").ann(p+"cpu", "1", p+"memory", "1G",
			cloudprovider.AnnotationUnitSize, "4", cloudprovider.AnnotationTopologyPerRequest, "nvidia.com/gpu.clique"),
			capacity: rl("cpu", "1", "memory", "1G", "pods", "110"), unit: 4, perRequest: "nvidia.com/gpu.clique"},
		{name: "malformed unit size", group: md("gpu").ann(p+"cpu", "1", p+"memory", "1G", cloudprovider.AnnotationUnitSize, "rack"),
			err: cloudprovider.AnnotationUnitSize},
		{name: "a per-request label the template fixes", group: md("gpu").ann(p+"cpu", "1", p+"memory", "1G", p+"labels", "clique=a",
			cloudprovider.AnnotationTopologyPerRequest, "clique"), err: "fixes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, tc.group.size(0, 3))
			tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
			switch {
			case tc.noCap:
				if !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("err = %v, want ErrNotImplemented", err)
				}
				return
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			n := tmpl.Node
			if diff := cmp.Diff(tc.capacity, n.Status.Capacity); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(n.Status.Capacity, n.Status.Allocatable); diff != "" {
				t.Errorf("allocatable differs from capacity:\n%s", diff)
			}
			wantLabels := map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": "gpu-template"}
			for k, v := range tc.labels {
				wantLabels[k] = v
			}
			if diff := cmp.Diff(wantLabels, n.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.taints, n.Spec.Taints); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if unit, _ := tmpl.UnitSize(); unit != max(tc.unit, 1) || tc.perRequest != "" && !tmpl.TopologyPerRequest(tc.perRequest) {
				t.Errorf("unit size %d, annotations %v; want %d, %q chosen per request", unit, n.Annotations, max(tc.unit, 1), tc.perRequest)
			}
			if n.Name != "gpu-template" || len(tmpl.ResourceSlices) != 0 {
				t.Errorf("name %s, %d slices", n.Name, len(tmpl.ResourceSlices))
			}
		})
	}
}

// Cluster API's opt-in contract: the infrastructure template's
// status.capacity and status.nodeInfo; the annotations win.
func TestTemplateFromInfrastructureTemplate(t *testing.T) {
	infra := infraTemplate("gpu-tmpl").set(map[string]any{"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}, "status", "capacity").
		set(map[string]any{"architecture": "arm64", "operatingSystem": "linux"}, "status", "nodeInfo")
	for _, tc := range []struct {
		name     string
		group    *obj
		capacity corev1.ResourceList
		arch     string
		noCap    bool
	}{
		{name: "status.capacity and nodeInfo", group: md("gpu").infraRef("gpu-tmpl"), capacity: rl("cpu", "32", "memory", "256Gi", "nvidia.com/gpu", "8", "pods", "110"), arch: "arm64"},
		{name: "annotations override", group: md("gpu").infraRef("gpu-tmpl").ann(keyCPU, "30", keyMaxPods, "64"),
			capacity: rl("cpu", "30", "memory", "256Gi", "nvidia.com/gpu", "8", "pods", "64"), arch: "arm64"},
		{name: "v1beta1 apiVersion reference", group: md("gpu").set(map[string]any{"apiVersion": infraAPI + "/v1alpha1", "kind": infraKind, "name": "gpu-tmpl"},
			"spec", "template", "spec", "infrastructureRef"), capacity: rl("cpu", "32", "memory", "256Gi", "nvidia.com/gpu", "8", "pods", "110"), arch: "arm64"},
		{name: "a missing template with annotations: the annotations", group: md("gpu").infraRef("nope").ann(keyCPU, "2", keyMemory, "4Gi"),
			capacity: rl("cpu", "2", "memory", "4Gi", "pods", "110"), arch: "amd64"},
		{name: "a missing template without annotations", group: md("gpu").infraRef("nope"), noCap: true},
		{name: "a kind nobody serves", group: md("gpu").set(map[string]any{"apiGroup": "nowhere.io", "kind": "X", "name": "y"}, "spec", "template", "spec", "infrastructureRef"), noCap: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, tc.group.size(0, 3), infra)
			tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
			if tc.noCap {
				if !errors.Is(err, cloudprovider.ErrNotImplemented) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.capacity, tmpl.Node.Status.Capacity); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
			if a := tmpl.Node.Labels["kubernetes.io/arch"]; a != tc.arch || tmpl.Node.Status.NodeInfo.Architecture != tc.arch {
				t.Errorf("arch %s / %s, want %s", a, tmpl.Node.Status.NodeInfo.Architecture, tc.arch)
			}
		})
	}
}

// Upstream's DRA template: one slice of gpu-0..N-1 with type=gpu, and a
// resourceSliceCount of 1 (kubernetes/autoscaler#10199).
func TestTemplateUpstreamDRA(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 3).ann(keyCPU, "8", keyMemory, "64Gi", keyGPUType, "nvidia.com/gpu", keyGPUCount, "2", keyDRADriver, "gpu.nvidia.com"))
	tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.ResourceSlices) != 1 {
		t.Fatalf("%d slices", len(tmpl.ResourceSlices))
	}
	s := tmpl.ResourceSlices[0]
	if s.Spec.Driver != "gpu.nvidia.com" || *s.Spec.NodeName != "gpu-template" || s.Spec.Pool.Name != "gpu-template" || s.Spec.Pool.ResourceSliceCount != 1 {
		t.Fatalf("slice %+v", s.Spec)
	}
	var names []string
	for _, d := range s.Spec.Devices {
		names = append(names, d.Name)
		if v := d.Attributes["type"].StringValue; v == nil || *v != "gpu" {
			t.Errorf("device %s: type %v", d.Name, v)
		}
	}
	if diff := cmp.Diff([]string{"gpu-0", "gpu-1"}, names); diff != "" {
		t.Fatal(diff)
	}
	if errs := validateSlice("upstream", s); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// An infrastructure template kind the provider may not list: the
// annotations still make a template, and without them the group waits for
// a real node; neither blocks the pass after the first, short, wait.
func TestTemplateInfraForbidden(t *testing.T) {
	old := infraSyncWait
	infraSyncWait = 100 * time.Millisecond
	defer func() { infraSyncWait = old }()
	e := newEnv(t, nil, md("gpu").size(0, 3).infraRef("gpu-tmpl").ann(keyCPU, "2", keyMemory, "4Gi"),
		md("bare").size(0, 3).infraRef("gpu-tmpl"), infraTemplate("gpu-tmpl"))
	e.dyn.PrependReactor("list", "testmachinetemplates", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(infraGVR.GroupResource(), "", errors.New("no RBAC"))
	})
	for range 2 {
		tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
		if err != nil || tmpl.Node.Status.Capacity.Cpu().String() != "2" {
			t.Fatalf("template %v, %v", tmpl, err)
		}
		_, err = e.group("MachineDeployment/team/bare").TemplateNodeInfo()
		if !errors.Is(err, cloudprovider.ErrNotImplemented) || !strings.Contains(err.Error(), "has not synced") {
			t.Fatalf("err = %v", err)
		}
	}
}
