package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

const (
	ns        = "team"
	infraAPI  = "infrastructure.test.dra-autoscaler.io"
	infraKind = "TestMachineTemplate"
)

var infraGVR = schema.GroupVersionResource{Group: infraAPI, Version: "v1alpha1", Resource: "testmachinetemplates"}

// obj is a small builder of unstructured objects.
type obj struct{ u *unstructured.Unstructured }

func newObj(apiVersion, kind, namespace, name string) *obj {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + kind + "-" + name))
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return &obj{u: u}
}

func capi(version, kind, name string) *obj {
	return newObj(DefaultGroup+"/"+version, kind, ns, name)
}

// md is a v1beta2 MachineDeployment with selector deployment-name=name.
func md(name string) *obj {
	o := capi("v1beta2", kindMachineDeployment, name)
	o.set(map[string]any{"cluster.x-k8s.io/deployment-name": name}, "spec", "selector", "matchLabels")
	o.set("c1", "spec", "clusterName")
	return o.replicas(0)
}

func ms(name string) *obj {
	o := capi("v1beta2", kindMachineSet, name)
	o.set(map[string]any{"cluster.x-k8s.io/set-name": name}, "spec", "selector", "matchLabels")
	return o.replicas(0)
}

func mp(name string) *obj { return capi("v1beta2", kindMachinePool, name).replicas(0) }

func machine(name string) *obj { return capi("v1beta2", kindMachine, name) }

func (o *obj) set(v any, path ...string) *obj {
	if err := unstructured.SetNestedField(o.u.Object, runtime.DeepCopyJSONValue(v), path...); err != nil {
		panic(err)
	}
	return o
}

func (o *obj) replicas(n int64) *obj { return o.set(n, "spec", "replicas") }

func (o *obj) ann(kv ...string) *obj {
	a := o.u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		a[kv[i]] = kv[i+1]
	}
	o.u.SetAnnotations(a)
	return o
}

func (o *obj) label(kv ...string) *obj {
	l := o.u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	o.u.SetLabels(l)
	return o
}

// size sets the min and max size annotations.
func (o *obj) size(min, max int) *obj {
	return o.ann(newKeys(DefaultGroup).minSize, strconv.Itoa(min), newKeys(DefaultGroup).maxSize, strconv.Itoa(max))
}

// of makes a Machine one of MachineDeployment md's.
func (o *obj) of(mdName string) *obj { return o.label("cluster.x-k8s.io/deployment-name", mdName) }

func (o *obj) providerID(id string) *obj { return o.set(id, "spec", "providerID") }

func (o *obj) node(name string) *obj { return o.set(name, "status", "nodeRef", "name") }

func (o *obj) created(t time.Time) *obj {
	o.u.SetCreationTimestamp(metav1.NewTime(t))
	return o
}

func (o *obj) deleting() *obj {
	now := metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))
	o.u.SetDeletionTimestamp(&now)
	o.u.SetFinalizers([]string{"machine.cluster.x-k8s.io"})
	return o
}

func (o *obj) condition(typ, status, reason, message string) *obj {
	list, _, _ := unstructured.NestedSlice(o.u.Object, "status", "conditions")
	list = append(list, map[string]any{"type": typ, "status": status, "reason": reason, "message": message})
	return o.set(list, "status", "conditions")
}

func (o *obj) infraRef(name string) *obj {
	return o.set(map[string]any{"apiGroup": infraAPI, "kind": infraKind, "name": name}, "spec", "template", "spec", "infrastructureRef")
}

func infraTemplate(name string) *obj {
	return newObj(infraAPI+"/v1alpha1", infraKind, ns, name)
}

func configMap(name string, data map[string]string) *obj {
	d := map[string]any{}
	for k, v := range data {
		d[k] = v
	}
	return newObj("v1", "ConfigMap", ns, name).set(d, "data")
}

// env is a provider over a fake management cluster.
type env struct {
	t     testing.TB
	dyn   *dynamicfake.FakeDynamicClient
	disc  *fakediscovery.FakeDiscovery
	p     *Provider
	clock *testingclock.FakeClock

	mu sync.Mutex
	// failPatch makes patches of the resource (e.g. "machinedeployments/scale") fail.
	failPatch map[string]error
	rv        int
	// meanwhile, if set, runs once right before the next scale write is
	// applied: someone else's change between the provider's read and
	// its write.
	meanwhile func(u *unstructured.Unstructured)
}

func capiResources(version string, pools bool) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: DefaultGroup + "/" + version}
	kinds := map[string]string{"machinedeployments": kindMachineDeployment, "machinesets": kindMachineSet, "machines": kindMachine}
	if pools {
		kinds["machinepools"] = kindMachinePool
	}
	for r, k := range kinds {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Kind: k, Namespaced: true})
		if k != kindMachine {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r + "/scale", Kind: "Scale", Group: "autoscaling", Version: "v1"})
		}
	}
	return l
}

func listKinds() map[schema.GroupVersionResource]string {
	out := map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "configmaps"}: "ConfigMapList",
		infraGVR:                                infraKind + "List",
	}
	for _, v := range []string{"v1beta1", "v1beta2"} {
		for r, k := range map[string]string{"machinedeployments": kindMachineDeployment, "machinesets": kindMachineSet, "machines": kindMachine, "machinepools": kindMachinePool} {
			out[schema.GroupVersionResource{Group: DefaultGroup, Version: v, Resource: r}] = k + "List"
		}
	}
	return out
}

// newEnv starts a provider (v1beta2 with MachinePools unless resources
// say otherwise) over objs.
func newEnv(t *testing.T, specs []string, objs ...*obj) *env {
	t.Helper()
	return newEnvWith(t, specs, []*metav1.APIResourceList{capiResources("v1beta2", true), capiResources("v1beta1", true),
		{GroupVersion: infraAPI + "/v1alpha1", APIResources: []metav1.APIResource{{Name: "testmachinetemplates", Kind: infraKind, Namespaced: true}}}}, objs...)
}

func newEnvWith(t *testing.T, specs []string, resources []*metav1.APIResourceList, objs ...*obj) *env {
	t.Helper()
	e, err := tryEnv(t, specs, resources, objs...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func tryEnv(t testing.TB, specs []string, resources []*metav1.APIResourceList, objs ...*obj) (*env, error) {
	return tryEnvOpts(t, nil, specs, resources, objs...)
}

// tryEnvOpts is tryEnv with setup changing the provider's options.
func tryEnvOpts(t testing.TB, setup func(*Options), specs []string, resources []*metav1.APIResourceList, objs ...*obj) (*env, error) {
	var runtimeObjs []runtime.Object
	for _, o := range objs {
		u := o.u.DeepCopy()
		if u.GetResourceVersion() == "" {
			// The API server always has one: preconditions depend on it.
			u.SetResourceVersion("1")
		}
		runtimeObjs = append(runtimeObjs, u)
	}
	e := &env{t: t, failPatch: map[string]error{}, clock: testingclock.NewFakeClock(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))}
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), runtimeObjs...)
	e.disc = &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: resources}}
	e.dyn.PrependReactor("*", "*", e.react)
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	o := Options{Dynamic: e.dyn, Discovery: e.disc, AutoDiscovery: specs, Clock: e.clock, Logger: &logger, SyncTimeout: 10 * time.Second}
	if setup != nil {
		setup(&o)
	}
	p, err := New(t.Context(), o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = p.Cleanup() })
	e.p = p
	return e, nil
}

func benchEnv(b *testing.B, objs []*obj) *env {
	e, err := tryEnv(b, nil, []*metav1.APIResourceList{capiResources("v1beta2", true)}, objs...)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// react emulates the scale subresource (autoscaling/v1 Scale over
// spec.replicas), bumps resourceVersions and injects patch failures.
func (e *env) react(action clienttesting.Action) (bool, runtime.Object, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	res := action.GetResource()
	key := res.Resource
	if action.GetSubresource() != "" {
		key += "/" + action.GetSubresource()
	}
	if pa, ok := action.(clienttesting.PatchAction); ok {
		if err := e.failPatch[key]; err != nil {
			return true, nil, err
		}
		if action.GetSubresource() == "scale" {
			var patch struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Spec struct {
					Replicas *int64 `json:"replicas"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Spec.Replicas == nil {
				return true, nil, fmt.Errorf("bad scale patch %s", pa.GetPatch())
			}
			u, err := e.getLocked(res, pa.GetNamespace(), pa.GetName())
			if err != nil {
				return true, nil, err
			}
			if f := e.meanwhile; f != nil {
				e.meanwhile = nil
				f(u)
				if err := e.updateLocked(res, u); err != nil {
					return true, nil, err
				}
			}
			// The API server's precondition: a write based on an older
			// read conflicts.
			if rv := patch.Metadata.ResourceVersion; rv != "" && rv != u.GetResourceVersion() {
				return true, nil, apierrors.NewConflict(res.GroupResource(), pa.GetName(), fmt.Errorf("the object has been modified"))
			}
			_ = unstructured.SetNestedField(u.Object, *patch.Spec.Replicas, "spec", "replicas")
			if err := e.updateLocked(res, u); err != nil {
				return true, nil, err
			}
			return true, scaleOf(u), nil
		}
		return false, nil, nil
	}
	if ga, ok := action.(clienttesting.GetAction); ok && action.GetSubresource() == "scale" {
		u, err := e.getLocked(res, ga.GetNamespace(), ga.GetName())
		if err != nil {
			return true, nil, err
		}
		return true, scaleOf(u), nil
	}
	return false, nil, nil
}

func (e *env) getLocked(res schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	o, err := e.dyn.Tracker().Get(res, namespace, name)
	if err != nil {
		return nil, err
	}
	return o.(*unstructured.Unstructured), nil
}

func (e *env) updateLocked(res schema.GroupVersionResource, u *unstructured.Unstructured) error {
	e.rv++
	u.SetResourceVersion(strconv.Itoa(1000 + e.rv))
	return e.dyn.Tracker().Update(res, u, u.GetNamespace())
}

func scaleOf(u *unstructured.Unstructured) *unstructured.Unstructured {
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	s := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": n}}}
	s.SetAPIVersion("autoscaling/v1")
	s.SetKind("Scale")
	s.SetName(u.GetName())
	s.SetNamespace(u.GetNamespace())
	s.SetResourceVersion(u.GetResourceVersion())
	return s
}

func (e *env) gvr(kind string) schema.GroupVersionResource { return e.p.gvr[kind] }

// get reads an object from the fake API server.
func (e *env) get(kind, name string) *unstructured.Unstructured {
	e.t.Helper()
	u, err := e.dyn.Resource(e.gvr(kind)).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

func (e *env) replicas(kind, name string) int64 {
	n, _, _ := unstructured.NestedInt64(e.get(kind, name).Object, "spec", "replicas")
	return n
}

// write replaces (or creates) an object in the fake API server.
func (e *env) write(gvr schema.GroupVersionResource, o *obj) {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	u := o.u.DeepCopy()
	if _, err := e.dyn.Tracker().Get(gvr, u.GetNamespace(), u.GetName()); err != nil {
		if err := e.dyn.Tracker().Create(gvr, u, u.GetNamespace()); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	if err := e.updateLocked(gvr, u); err != nil {
		e.t.Fatal(err)
	}
}

// refresh waits until the informers hold what the fake API server holds,
// then refreshes the provider.
func (e *env) refresh() {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.t.Context(), 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for kind, gvr := range e.p.gvr {
			want, err := e.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			var l = e.p.machines
			if kind != kindMachine {
				l = e.p.scalables[kind]
			}
			for _, w := range want.Items {
				got, err := l.ByNamespace(w.GetNamespace()).Get(w.GetName())
				if err != nil || got.(*unstructured.Unstructured).GetResourceVersion() != w.GetResourceVersion() {
					return false, nil
				}
			}
			have, _ := l.List(everything())
			if len(have) != len(want.Items) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("informers did not catch up: %v", err)
	}
	if err := e.p.Refresh(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// group returns the provider's group id, failing when it has none.
func (e *env) group(id string) *nodeGroup {
	e.t.Helper()
	for _, g := range e.p.NodeGroups() {
		if g.Id() == id {
			return g.(*nodeGroup)
		}
	}
	e.t.Fatalf("no node group %s among %v", id, ids(e.p.NodeGroups()))
	return nil
}

func everything() labels.Selector { return labels.Everything() }

func ids(gs []cloudprovider.NodeGroup) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.Id())
	}
	return out
}
