package clusterapi

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestNodeGroups(t *testing.T) {
	owned := ms("gpu-abc").size(0, 3)
	owned.u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: DefaultGroup + "/v1beta2", Kind: kindMachineDeployment, Name: "gpu", UID: "x"}})
	all := []*obj{
		md("gpu").size(0, 5).label("color", "green"),
		md("cpu").size(1, 3),
		md("plain"),                                          // no annotations: not autoscaled
		md("off").size(0, 0),                                 // max 0: skipped, as upstream
		md("bad").ann(newKeys(DefaultGroup).maxSize, "many"), // left out, the others go on
		md("paused").size(0, 3).ann("cluster.x-k8s.io/paused", ""),
		md("other").size(0, 3).set("c2", "spec", "clusterName"),
		owned,
		ms("solo").size(0, 2),
		mp("pool").size(0, 4).label("color", "green"),
	}
	for _, tc := range []struct {
		name  string
		specs []string
		want  []string
	}{
		{name: "no specs: everything annotated", want: []string{"MachineDeployment/team/cpu", "MachineDeployment/team/gpu", "MachineDeployment/team/other", "MachinePool/team/pool", "MachineSet/team/solo"}},
		{name: "cluster name", specs: []string{"clusterapi:clusterName=c2"}, want: []string{"MachineDeployment/team/other"}},
		{name: "labels", specs: []string{"clusterapi:color=green"}, want: []string{"MachineDeployment/team/gpu", "MachinePool/team/pool"}},
		{name: "AND within a spec", specs: []string{"clusterapi:clusterName=c1,color=green"}, want: []string{"MachineDeployment/team/gpu"}},
		{name: "OR across specs", specs: []string{"clusterapi:clusterName=c2", "clusterapi:color=green"},
			want: []string{"MachineDeployment/team/gpu", "MachineDeployment/team/other", "MachinePool/team/pool"}},
		{name: "namespace", specs: []string{"clusterapi:namespace=elsewhere"}, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.specs, all...)
			if got := ids(e.p.NodeGroups()); !slices.Equal(got, tc.want) {
				t.Fatalf("groups %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeGroupSizes(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(1, 5).replicas(2))
	g := e.group("MachineDeployment/team/gpu")
	if target, err := g.TargetSize(); g.MinSize() != 1 || g.MaxSize() != 5 || target != 2 || err != nil {
		t.Fatalf("min %d max %d target %d %v", g.MinSize(), g.MaxSize(), target, err)
	}
	// The annotation changes: the group follows at the next Refresh.
	e.write(e.gvr(kindMachineDeployment), md("gpu").size(2, 8).replicas(2))
	e.refresh()
	if g.MinSize() != 2 || g.MaxSize() != 8 {
		t.Fatalf("after the change: min %d max %d", g.MinSize(), g.MaxSize())
	}
}

func TestAPIVersion(t *testing.T) {
	infra := &metav1.APIResourceList{GroupVersion: infraAPI + "/v1alpha1"}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		obj       *obj
		want      string
		err       string
	}{
		{name: "v1beta2 preferred", resources: []*metav1.APIResourceList{capiResources("v1beta1", true), capiResources("v1beta2", true)}, want: "v1beta2"},
		{name: "v1beta1 accepted", resources: []*metav1.APIResourceList{capiResources("v1beta1", false)}, want: "v1beta1",
			obj: capi("v1beta1", kindMachineDeployment, "old").size(0, 2).set(map[string]any{"cluster.x-k8s.io/deployment-name": "old"}, "spec", "selector", "matchLabels")},
		{name: "not installed", resources: []*metav1.APIResourceList{infra}, err: "does not serve API group cluster.x-k8s.io"},
		{name: "only v1alpha4", resources: []*metav1.APIResourceList{capiResources("v1alpha4", false)}, err: "reads v1beta2 or v1beta1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []*obj{}
			if tc.obj != nil {
				objs = append(objs, tc.obj)
			}
			e, err := tryEnv(t, nil, tc.resources, objs...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.p.version != tc.want {
				t.Fatalf("version %s, want %s", e.p.version, tc.want)
			}
			if tc.obj != nil && len(e.p.NodeGroups()) != 1 {
				t.Fatalf("groups %v", ids(e.p.NodeGroups()))
			}
			if _, pools := e.p.gvr[kindMachinePool]; pools != (tc.want == "v1beta2") {
				t.Fatalf("MachinePools watched: %v", pools)
			}
		})
	}
}

func TestNodeGroupForNode(t *testing.T) {
	pool := mp("pool").size(0, 4).set([]any{"aws:///us-east-1a/i-pool1"}, "spec", "providerIDList")
	e := newEnv(t, nil,
		md("gpu").size(0, 5), md("cpu").size(0, 5),
		machine("gpu-1").of("gpu").providerID("aws:///us-east-1a/i-111").node("n1"),
		machine("cpu-1").of("cpu").providerID("aws:///us-east-1a/i-222"),
		machine("gpu-2").of("gpu"),
		machine("stray").providerID("aws:///us-east-1a/i-333"),
		pool)
	withPID := func(name, pid string) *corev1.Node {
		n := builder.Node(name).Obj()
		n.Spec.ProviderID = pid
		return n
	}
	annotated := builder.Node("n9").Obj()
	annotated.Annotations = map[string]string{"cluster.x-k8s.io/machine": "cpu-1", "cluster.x-k8s.io/cluster-namespace": ns}
	gone := builder.Node("n8").Obj()
	gone.Annotations = map[string]string{"cluster.x-k8s.io/machine": "deleted", "cluster.x-k8s.io/cluster-namespace": ns}
	for _, tc := range []struct {
		name     string
		node     *corev1.Node
		group    string
		instance bool
	}{
		{name: "providerID", node: withPID("n1", "aws:///us-east-1a/i-111"), group: "MachineDeployment/team/gpu", instance: true},
		{name: "providerID spelled differently", node: withPID("n1", "aws://us-east-1a/i-111"), group: "MachineDeployment/team/gpu", instance: true},
		{name: "machine annotation", node: annotated, group: "MachineDeployment/team/cpu", instance: true},
		{name: "pending id from the tracker", node: withPID(pendingPrefix+"team/gpu-2", pendingPrefix+"team/gpu-2"), group: "MachineDeployment/team/gpu", instance: true},
		{name: "MachinePool providerIDList", node: withPID("p1", "aws:///us-east-1a/i-pool1"), group: "MachinePool/team/pool", instance: true},
		{name: "a Machine of no group", node: withPID("s", "aws:///us-east-1a/i-333"), instance: true},
		{name: "unknown node", node: withPID("x", "aws:///us-east-1a/i-999"), instance: true},
		{name: "its Machine is gone", node: gone, instance: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := e.p.NodeGroupForNode(tc.node)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if g != nil {
				got = g.Id()
			}
			if got != tc.group {
				t.Fatalf("group %q, want %q", got, tc.group)
			}
			if has, err := e.p.HasInstance(tc.node); has != tc.instance || err != nil {
				t.Fatalf("HasInstance %v %v, want %v", has, err, tc.instance)
			}
		})
	}
}

// A group whose resource is deleted keeps answering (target 0) so the
// loop goes on; its scale calls fail naming it.
func TestDeletedGroup(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 5).replicas(2), md("cpu").size(0, 5))
	g := e.group("MachineDeployment/team/gpu")
	if err := e.dyn.Resource(e.gvr(kindMachineDeployment)).Namespace(ns).Delete(t.Context(), "gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.refresh()
	if target, err := g.TargetSize(); target != 0 || err != nil {
		t.Fatalf("target %d %v", target, err)
	}
	if _, err := g.IncreaseSize(t.Context(), 1); err == nil || !strings.Contains(err.Error(), "MachineDeployment team/gpu is gone") {
		t.Fatalf("IncreaseSize: %v", err)
	}
	if _, err := g.TemplateNodeInfo(); err == nil {
		t.Fatal("TemplateNodeInfo of a deleted group succeeded")
	}
	if got := ids(e.p.NodeGroups()); !slices.Equal(got, []string{"MachineDeployment/team/cpu"}) {
		t.Fatalf("groups %v", got)
	}
}

// The capacity-reservation label names the group's CapacityReservation
// object, on every scalable kind; a value no object can be named is
// returned as is and told on the resource once.
func TestCapacityReservationLabel(t *testing.T) {
	rec := record.NewFakeRecorder(20)
	resources := []*metav1.APIResourceList{capiResources("v1beta2", true)}
	e, err := tryEnvOpts(t, func(o *Options) { o.Events = rec }, nil, resources,
		md("gpu").size(0, 3).label(LabelCapacityReservation, "h100-december"),
		md("cpu").size(0, 3),
		md("odd").size(0, 3).label(LabelCapacityReservation, "H100_Dec"),
		ms("solo").size(0, 2).label(LabelCapacityReservation, "solo-res"),
		mp("pool").size(0, 4).label(LabelCapacityReservation, "pool-res"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"MachineDeployment/team/gpu": "h100-december", "MachineDeployment/team/cpu": "",
		"MachineDeployment/team/odd": "H100_Dec", "MachineSet/team/solo": "solo-res", "MachinePool/team/pool": "pool-res",
	}
	for range 2 {
		for id, w := range want {
			if got := e.group(id).CapacityReservation(); got != w {
				t.Errorf("%s names %q, want %q", id, got, w)
			}
		}
	}
	var events []string
	for len(rec.Events) > 0 {
		events = append(events, <-rec.Events)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], `Warning InvalidCapacityReservationLabel Label autoscaling.dra-autoscaler.io/capacity-reservation="H100_Dec" names no CapacityReservation: a lowercase RFC 1123 subdomain`) {
		t.Errorf("events %q, want one about the odd label", events)
	}
	// Relabelled, then gone.
	e.write(e.gvr(kindMachineDeployment), md("gpu").size(0, 3).label(LabelCapacityReservation, "h100-january"))
	e.refresh()
	if got := e.group("MachineDeployment/team/gpu").CapacityReservation(); got != "h100-january" {
		t.Errorf("after relabelling: %q", got)
	}
	g := e.group("MachineDeployment/team/gpu")
	e.write(e.gvr(kindMachineDeployment), md("gpu"))
	e.refresh()
	if got := g.CapacityReservation(); got != "" {
		t.Errorf("a group no longer autoscaled names %q", got)
	}
}
