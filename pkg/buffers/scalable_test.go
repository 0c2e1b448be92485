package buffers

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var (
	rcs        = schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}
	widgets    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	clusterWid = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}
	// versions the mapper looks kinds up in, as discovery would list them.
	versions = []schema.GroupVersion{{Version: "v1"}, {Group: "example.com", Version: "v1"}}
)

// scalable is an object of gvr in namespace ns with spec (nil: none).
func scalable(gvr schema.GroupVersionResource, kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	if spec == nil {
		delete(u.Object, "spec")
	}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(k8stypes.UID("uid-" + name))
	u.SetGeneration(4)
	return u
}

// scalesOf answers GETs of the scale subresource from scales (keyed
// resource/name; absent: no such subresource) and refuses reading forbid.
func scalesOf(dyn *dynamicfake.FakeDynamicClient, scales map[string]map[string]any, forbid string) {
	dyn.PrependReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		g := a.(clienttesting.GetAction)
		key := g.GetResource().Resource + "/" + g.GetName()
		if key == forbid {
			return true, nil, apierrors.NewForbidden(g.GetResource().GroupResource(), g.GetName(), errors.New("RBAC"))
		}
		if g.GetSubresource() != "scale" {
			return false, nil, nil
		}
		st, ok := scales[key]
		if !ok {
			return true, nil, apierrors.NewNotFound(g.GetResource().GroupResource(), g.GetName())
		}
		return true, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "status": st}}, nil
	})
}

func TestScalesWorkload(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(versions)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ReplicationController"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "ClusterWidget"}, meta.RESTScopeRoot)

	podSpec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i",
		"resources": map[string]any{"requests": map[string]any{"cpu": "2"}}}}}
	rc := scalable(rcs, "ReplicationController", "rc", map[string]any{"replicas": int64(3),
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "rc"}}, "spec": podSpec}})
	podless := scalable(widgets, "Widget", "podless", map[string]any{"size": int64(2)})
	running := scalable(widgets, "Widget", "running", map[string]any{"size": int64(2)})
	// A template field that is no pod template: the pods are read.
	odd := scalable(widgets, "Widget", "odd", map[string]any{"template": map[string]any{"spec": map[string]any{"containers": "not a list"}}})
	noScale := scalable(widgets, "Widget", "noscale", nil)
	noSelector := scalable(widgets, "Widget", "noselector", nil)
	secret := scalable(widgets, "Widget", "secret", nil)
	cw := scalable(clusterWid, "ClusterWidget", "cw", nil)
	cw.SetNamespace("")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rcs: "ReplicationControllerList", widgets: "WidgetList", clusterWid: "ClusterWidgetList"}, rc, podless, running, odd, noScale, noSelector, secret, cw)
	scalesOf(dyn, map[string]map[string]any{
		"replicationcontrollers/rc": {"replicas": int64(3), "selector": "app=rc"},
		"widgets/podless":           {"replicas": int64(2), "selector": "app=podless"},
		"widgets/running":           {"replicas": int64(5), "selector": "app=running"},
		"widgets/odd":               {"replicas": int64(1), "selector": "app=running"},
		"widgets/noselector":        {"replicas": int64(1)},
	}, "widgets/secret")

	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, cpu string, edit func(*corev1.Pod)) *corev1.Pod {
		p := builder.Pod("ns", name).CPU(cpu).Label("app", "running").UID(k8stypes.UID("uid-" + name)).Node("n1").Obj()
		p.CreationTimestamp = metav1.NewTime(t0.Add(-age))
		if edit != nil {
			edit(p)
		}
		return p
	}
	gone := metav1.NewTime(t0)
	client := fake.NewClientset(
		pod("old", time.Hour, "1", nil),
		pod("new", time.Minute, "3", nil),
		pod("leaving", 0, "7", func(p *corev1.Pod) { p.DeletionTimestamp = &gone; p.Finalizers = []string{"x"} }),
		pod("done", 0, "9", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	)
	s := &Scales{Dynamic: dyn, Mapper: mapper, Client: client}

	for _, tc := range []struct {
		ref      v1beta1.ScalableRef
		replicas int32
		cpu      string // the template's first container's request
		version  string
		err      func(error) bool
	}{
		{ref: v1beta1.ScalableRef{Kind: "ReplicationController", Name: "rc"}, replicas: 3, cpu: "2", version: "replicationcontrollers/uid-rc/4"},
		{ref: v1beta1.ScalableRef{APIGroup: "core", Kind: "ReplicationController", Name: "rc"}, replicas: 3, cpu: "2", version: "replicationcontrollers/uid-rc/4"},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "running"}, replicas: 5, cpu: "3", version: "widgets/uid-running/4/pod/uid-new"},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "odd"}, replicas: 1, cpu: "3"},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "podless"}, err: isErr[*NoPodsError]},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "noscale"}, err: isErr[*UnsupportedKindError]},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "noselector"}, err: isErr[*UnsupportedKindError]},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "ClusterWidget", Name: "cw"}, err: isErr[*UnsupportedKindError]},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Gadget", Name: "g"}, err: isErr[*UnsupportedKindError]},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "missing"}, err: apierrors.IsNotFound},
		{ref: v1beta1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "secret"}, err: apierrors.IsForbidden},
	} {
		t.Run(fmt.Sprintf("%s/%s/%s", tc.ref.APIGroup, tc.ref.Kind, tc.ref.Name), func(t *testing.T) {
			wl, err := s.Workload("ns", tc.ref)
			if tc.err != nil {
				if !tc.err(err) {
					t.Errorf("error %v (%T), not the one wanted", err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := wl.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			if wl.Replicas != tc.replicas || got.String() != tc.cpu || wl.Generation != 4 {
				t.Errorf("workload of %d replicas, generation %d, %s CPU; want %d replicas, generation 4, %s CPU", wl.Replicas, wl.Generation, got.String(), tc.replicas, tc.cpu)
			}
			if tc.version != "" && wl.Version != tc.version {
				t.Errorf("version %q, want %q", wl.Version, tc.version)
			}
		})
	}
}

// Through Listers, a kind the informers do not cover goes to the scale
// resolver; without one it is unsupported, and so is a built-in kind
// whose lister is missing (never a nil dereference).
func TestListersFallBackToScales(t *testing.T) {
	ref := v1beta1.ScalableRef{Kind: "ReplicationController", Name: "rc"}
	if _, err := (&Listers{}).Workload("ns", ref); !isErr[*UnsupportedKindError](err) {
		t.Errorf("error %v, want unsupported without a scale resolver", err)
	}
	if _, err := (&Listers{}).Workload("ns", v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "d"}); !isErr[*UnsupportedKindError](err) {
		t.Errorf("error %v, want unsupported without a Deployment lister", err)
	}
	mapper := meta.NewDefaultRESTMapper(versions)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ReplicationController"}, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{rcs: "ReplicationControllerList"})
	l := &Listers{Scales: &Scales{Dynamic: dyn, Mapper: mapper}}
	if _, err := l.Workload("ns", ref); !apierrors.IsNotFound(err) {
		t.Errorf("error %v, want the scale resolver's not found", err)
	}
}

func isErr[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}
