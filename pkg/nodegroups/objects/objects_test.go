package objects_test

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups/objects"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var t0 = time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)

func newClient() *dynfake.FakeDynamicClient {
	return dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.NodeGroupResource: "NodeGroupList"})
}

func gpuGroup(id string, ready int) *nodegroups.Info {
	node := builder.Node("tmpl").CPU("32").Memory("256Gi").Obj()
	slice := builder.ResourceSlice("tmpl-gpu", "tmpl", "gpu.example.com", "tmpl").
		Devices(builder.Device("gpu-0"), builder.Device("gpu-1")).Obj()
	g := &nodegroups.Info{Id: id, Min: 0, Max: 4, Target: ready,
		Template: &cloudprovider.NodeTemplate{Node: node, ResourceSlices: []*resourceapi.ResourceSlice{slice}}, TemplateSource: "provider"}
	for i := range ready {
		g.Ready = append(g.Ready, builder.Node(id+"-"+string(rune('a'+i))).Obj())
	}
	return g
}

// writes are the create, update and delete calls the client saw.
func writes(c *dynfake.FakeDynamicClient) (n int, verbs []string) {
	for _, a := range c.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "get" {
			n++
			verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
		}
	}
	return n, verbs
}

func get(t *testing.T, c *dynfake.FakeDynamicClient, name string) *v1alpha1.NodeGroup {
	t.Helper()
	u, err := c.Resource(v1alpha1.NodeGroupResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ng v1alpha1.NodeGroup
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ng); err != nil {
		t.Fatal(err)
	}
	return &ng
}

// One object per group, written only when its status changes; objects of
// groups that are gone are deleted, another owner's never touched.
func TestPublish(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newClient()
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "NodeGroup",
		"metadata": map[string]any{"name": "theirs", "labels": map[string]any{objects.LabelOwner: "someone-else"}}}}
	if _, err := c.Resource(v1alpha1.NodeGroupResource).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := backoff.New(5*time.Minute, 30*time.Minute, time.Hour)
	counts := 0
	p := objects.New(c, "kube-system.cluster-autoscaler", objects.Sources{
		Limiter: limits.New(config.Default(), nil), Backoff: b, ScaleUpFromZero: true,
		ProvisionTimes: func(g string) []time.Duration {
			if g == "a" {
				return []time.Duration{time.Minute, 3 * time.Minute, 2 * time.Minute}
			}
			return nil
		},
		Devices: func(_ context.Context, _ string, _ *cloudprovider.NodeTemplate, _ []*resourceapi.DeviceClass) (map[string]int, error) {
			counts++
			return map[string]int{"gpu": 2}, nil
		},
	})
	groups := []*nodegroups.Info{gpuGroup("a", 1), gpuGroup("B/weird", 0), gpuGroup("theirs", 0)}
	in := objects.PublishInput{Now: t0, Groups: groups}
	c.ClearActions()
	res := p.Publish(ctx, in)
	if res.Created != 2 || res.Updated != 0 || res.Deleted != 0 {
		t.Errorf("first pass: %+v, want 2 created (theirs left alone)", res)
	}
	a := get(t, c, "a")
	if a.Labels[objects.LabelOwner] != "kube-system.cluster-autoscaler" || a.Labels[objects.LabelManagedBy] != objects.ManagedBy {
		t.Errorf("labels %v", a.Labels)
	}
	st := a.Status
	if st.NodeGroup != "a" || st.MaxSize != 4 || st.TargetSize != 1 || st.ReadyNodes != 1 || st.Health != v1alpha1.NodeGroupHealthy {
		t.Errorf("status %+v", st)
	}
	if st.Provisionable.Nodes != 3 || st.Provisionable.LimitedBy != limits.ReasonGroupMax ||
		len(st.Provisionable.DeviceClasses) != 1 || st.Provisionable.DeviceClasses[0].Devices != 6 {
		t.Errorf("provisionable %+v", st.Provisionable)
	}
	if st.Template == nil || len(st.Template.Drivers) != 1 || st.Template.Drivers[0].Devices != 2 || st.Template.Allocatable.Cpu().String() != "32" {
		t.Errorf("template %+v", st.Template)
	}
	if pt := st.ProvisioningTime; pt == nil || pt.Samples != 3 || pt.P50.Duration != 2*time.Minute || pt.P90.Duration != 3*time.Minute {
		t.Errorf("provisioning time %+v", pt)
	}
	weird := objects.ObjectName("B/weird")
	if got := get(t, c, weird).Status.NodeGroup; got != "B/weird" {
		t.Errorf("object %s is of group %q", weird, got)
	}
	if theirs := get(t, c, "theirs"); theirs.Status.NodeGroup != "" {
		t.Errorf("another owner's object was written: %+v", theirs.Status)
	}

	c.ClearActions()
	if res := p.Publish(ctx, objects.PublishInput{Now: t0.Add(time.Minute), Groups: groups}); res.Unchanged != 2 {
		t.Errorf("second pass, nothing changed: %+v", res)
	}
	if n, verbs := writes(c); n != 0 {
		t.Errorf("nothing changed, yet %d writes: %v", n, verbs)
	}

	// B left out of a pass (the provider's answer was invalid) but still
	// a group: its object stays.
	c.ClearActions()
	if res := p.Publish(ctx, objects.PublishInput{Now: t0.Add(90 * time.Second), Groups: groups[:1], Exist: []string{"a", "B/weird"}}); res.Deleted != 0 {
		t.Errorf("an existing group's object deleted: %+v", res)
	}
	b.Fail("a", "outOfResources", t0.Add(2*time.Minute))
	c.ClearActions()
	res = p.Publish(ctx, objects.PublishInput{Now: t0.Add(2 * time.Minute), Groups: groups[:1], Exist: []string{"a"}})
	if res.Updated != 1 || res.Deleted != 1 {
		t.Errorf("a backed off, B gone: %+v", res)
	}
	if n, verbs := writes(c); n != 2 {
		t.Errorf("want one status update and one delete, got %v", verbs)
	}
	st = get(t, c, "a").Status
	if st.Health != v1alpha1.NodeGroupBackoff || st.Backoff == nil || st.Backoff.Reason != "outOfResources" ||
		st.Provisionable.Nodes != 0 || st.Provisionable.LimitedBy != objects.LimitedByBackoff {
		t.Errorf("backed off: %+v", st)
	}
	if _, err := c.Resource(v1alpha1.NodeGroupResource).Get(ctx, weird, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the object of a group gone is still there: %v", err)
	}
	get(t, c, "theirs")
	if counts == 0 {
		t.Error("devices never counted")
	}
}

// A cluster without the CRD: nothing written, no error, and writing
// starts once it is served.
func TestPublishWithoutCRD(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newClient()
	served := false
	c.PrependReactor("list", "nodegroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		if served {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "nodegroups"}, "")
	})
	p := objects.New(c, "me", objects.Sources{ScaleUpFromZero: true})
	in := objects.PublishInput{Now: t0, Groups: []*nodegroups.Info{gpuGroup("a", 0)}}
	for range 3 {
		if res := p.Publish(ctx, in); res != (objects.Result{}) {
			t.Fatalf("without the CRD: %+v", res)
		}
	}
	if n, verbs := writes(c); n != 0 {
		t.Errorf("writes without the CRD: %v", verbs)
	}
	served = true
	if res := p.Publish(ctx, in); res.Created != 1 {
		t.Errorf("once served: %+v", res)
	}
}

func TestObjectName(t *testing.T) {
	for _, tc := range []struct {
		id   string
		same bool
	}{
		{"gpu-a100", true},
		{"pool.example", true},
		{"MachineDeployment/ns/gpu", false},
		{"UPPER", false},
		{"-lead", false},
	} {
		name := objects.ObjectName(tc.id)
		if (name == tc.id) != tc.same {
			t.Errorf("ObjectName(%q) = %q", tc.id, name)
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Errorf("ObjectName(%q) = %q, invalid: %v", tc.id, name, msgs)
		}
	}
	if objects.ObjectName("A/b") == objects.ObjectName("a-b") || objects.ObjectName("A/b") == objects.ObjectName("a/b") {
		t.Error("two ids share a name")
	}
	if got := objects.Identity("kube-system", "cluster-autoscaler"); got != "kube-system.cluster-autoscaler" {
		t.Errorf("Identity = %q", got)
	}
	long := objects.Identity("a-namespace-with-a-rather-long-name", "and-a-lease-whose-name-is-long-too")
	if msgs := validation.IsValidLabelValue(long); len(msgs) > 0 {
		t.Errorf("Identity = %q, invalid: %v", long, msgs)
	}
}
