package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options tune the controller.
type Options struct {
	// KubeletVersion is what Nodes report when their spec names none; set
	// it to the Machines' spec.version, or Cluster API shows them not
	// UpToDate (kwok's own version is "kwok-<version>").
	KubeletVersion string
	// Resync re-reads every object this often, for boot delays and faults
	// changed on a template (default 2s).
	Resync time.Duration
	// Workers reconciling in parallel (default 4).
	Workers int
}

// Controller reconciles the kinds of this package.
type Controller struct {
	dyn       dynamic.Interface
	kube      kubernetes.Interface
	opts      Options
	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[key]
}

// key names one object: its resource and namespace/name.
type key struct {
	res       schema.GroupVersionResource
	namespace string
	name      string
}

// New makes a controller on the given clients (all namespaces).
func New(dyn dynamic.Interface, kube kubernetes.Interface, opts Options) *Controller {
	if opts.Resync == 0 {
		opts.Resync = 2 * time.Second
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	c := &Controller{
		dyn: dyn, kube: kube, opts: opts,
		factory:   dynamicinformer.NewDynamicSharedInformerFactory(dyn, opts.Resync),
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "dev-infra"}),
	}
	for _, res := range []schema.GroupVersionResource{MachineResource, MachineTemplateResource, MachinePoolResource, ControlPlaneResource} {
		inf := c.factory.ForResource(res).Informer()
		enqueue := func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(metav1.Object); ok {
				c.queue.Add(key{res: res, namespace: m.GetNamespace(), name: m.GetName()})
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
		})
		c.informers[res] = inf
	}
	return c
}

// Run reconciles until ctx is done. The CRDs must be installed.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	for res, inf := range c.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("dev infrastructure: %s informer did not sync", res.Resource)
		}
	}
	klog.InfoS("dev infrastructure controller started")
	for range c.opts.Workers {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) work(ctx context.Context) {
	for {
		k, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		after, err := c.reconcile(ctx, k)
		switch {
		case apierrors.IsConflict(err):
			// Cluster API writes the same objects; read the newer one.
			klog.V(2).InfoS("dev infrastructure: conflict, retrying", "kind", k.res.Resource, "object", klog.KRef(k.namespace, k.name))
			c.queue.AddRateLimited(k)
		case err != nil && ctx.Err() == nil:
			klog.ErrorS(err, "dev infrastructure: reconcile failed", "kind", k.res.Resource, "object", klog.KRef(k.namespace, k.name))
			c.queue.AddRateLimited(k)
		case after > 0:
			c.queue.Forget(k)
			c.queue.AddAfter(k, after)
		default:
			c.queue.Forget(k)
		}
		c.queue.Done(k)
	}
}

// reconcile returns when to look again (0: on the next change or resync).
func (c *Controller) reconcile(ctx context.Context, k key) (time.Duration, error) {
	obj, exists, err := c.informers[k.res].GetIndexer().GetByKey(k.namespace + "/" + k.name)
	if err != nil || !exists {
		return 0, err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	switch k.res {
	case MachineResource:
		return c.reconcileMachine(ctx, u)
	case MachinePoolResource:
		return 0, c.reconcilePool(ctx, u)
	case MachineTemplateResource:
		return 0, c.reconcileTemplate(ctx, u)
	case ControlPlaneResource:
		return 0, c.reconcileControlPlane(ctx, u)
	}
	return 0, nil
}

// reconcileControlPlane reports the control plane initialized and managed
// elsewhere: Cluster API then needs no control-plane Machine and deletes a
// scaled-down Machine's Node.
func (c *Controller) reconcileControlPlane(ctx context.Context, u *unstructured.Unstructured) error {
	want := map[string]any{
		"initialization":              map[string]any{"controlPlaneInitialized": true},
		"externalManagedControlPlane": true,
		"initialized":                 true, // the v1beta1 contract's name
		"ready":                       true,
	}
	if !changes(u, want) {
		return nil
	}
	return c.patchStatus(ctx, ControlPlaneResource, u, want)
}

// reconcileTemplate publishes the autoscaling-from-zero status: capacity and
// nodeInfo of the machines the template makes.
func (c *Controller) reconcileTemplate(ctx context.Context, u *unstructured.Unstructured) error {
	var spec MachineSpec
	if err := nestedInto(u, &spec, "spec", "template", "spec"); err != nil {
		return fmt.Errorf("%s %s: spec.template.spec: %w", KindMachineTemplate, klog.KObj(u), err)
	}
	want := map[string]any{"capacity": nil, "nodeInfo": nil}
	if u.GetAnnotations()[PublishCapacityAnnotation] != "false" {
		capacity := map[string]any{}
		for name, q := range spec.Capacity {
			capacity[string(name)] = q.String()
		}
		info := nodeInfo(spec)
		want = map[string]any{"capacity": capacity,
			"nodeInfo": map[string]any{"architecture": info.Architecture, "operatingSystem": info.OperatingSystem}}
	}
	if !changes(u, want) {
		return nil
	}
	return c.patchStatus(ctx, MachineTemplateResource, u, want)
}

// changes says whether merging want into status would change it.
func changes(u *unstructured.Unstructured, want map[string]any) bool {
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	for k, v := range want {
		got, ok := status[k]
		if v == nil {
			if ok && got != nil {
				return true
			}
			continue
		}
		if !ok || !equalJSON(got, v) {
			return true
		}
	}
	return false
}

func (c *Controller) patchStatus(ctx context.Context, res schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) error {
	data, err := jsonMarshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(res).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), mergePatch, data, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// nestedInto decodes the object at path into out (missing: left as is).
// Through JSON, so quantities and durations parse as in any client.
func nestedInto(u *unstructured.Unstructured, out any, path ...string) error {
	v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !found || v == nil {
		return err
	}
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("%s is %T, want an object", strings.Join(path, "."), v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a typo in a test's template is an error, not a silent default
	return dec.Decode(out)
}

func nodeInfo(spec MachineSpec) NodeInfo {
	info := NodeInfo{Architecture: "amd64", OperatingSystem: "linux"}
	if spec.NodeInfo != nil {
		if spec.NodeInfo.Architecture != "" {
			info.Architecture = spec.NodeInfo.Architecture
		}
		if spec.NodeInfo.OperatingSystem != "" {
			info.OperatingSystem = spec.NodeInfo.OperatingSystem
		}
	}
	return info
}
