// Package observe is the first stage of the loop: it watches the cluster
// through client-go informers and hands each loop a consistent list of
// what is there (nodes, pods, the DRA objects, gangs, DaemonSets), plus a
// signal when new unschedulable pods appear so the loop can run early.
package observe

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ClusterState is what one loop works on, listed from the informers' caches.
// The objects are shared with the caches: treat them as read-only.
type ClusterState struct {
	Nodes                  []*corev1.Node
	Pods                   []*corev1.Pod
	ResourceSlices         []*resourceapi.ResourceSlice
	ResourceClaims         []*resourceapi.ResourceClaim
	ResourceClaimTemplates []*resourceapi.ResourceClaimTemplate
	DeviceClasses          []*resourceapi.DeviceClass
	DeviceTaintRules       []*resourceapi.DeviceTaintRule
	PodGroups              []*schedulingv1beta1.PodGroup
	Workloads              []*schedulingv1beta1.Workload
	// CompositePodGroups (scheduling.k8s.io/v1alpha3) bound the
	// disruption of the PodGroups under them; nil when not served.
	CompositePodGroups []*schedulingv1alpha3.CompositePodGroup
	// GangsServed: the cluster serves PodGroups and Workloads (empty
	// lists then mean there are none).
	GangsServed bool
	DaemonSets  []*appsv1.DaemonSet
	// CSINodes are the registered nodes' CSI drivers and attach limits, by
	// node name: a group's template from a real node keeps its node's.
	CSINodes map[string]*storagev1.CSINode
	// VolumeBindings are the claims the scheduler is having provisioned
	// for a node it picked ("namespace/claim" → node): their pods are in
	// the scheduler's binding cycle for that node.
	VolumeBindings map[string]string
}

// Observer owns the informers.
type Observer struct {
	factory informers.SharedInformerFactory
	served  Served
	trigger chan struct{}
	listers listers
	// scaleDown are scale-down's own informers (scaledown.go).
	scaleDown scaleDownListers
	// handlers are OnPods' and OnSlices' registrations, which Start
	// waits for.
	handlers []cache.ResourceEventHandlerRegistration
}

// Served says which optional APIs the cluster serves; informers for APIs
// that are not served would never sync.
type Served struct {
	DeviceTaintRules bool
	// Workloads is scheduling.k8s.io/v1beta1 Workload and PodGroup
	// (GenericWorkload).
	Workloads bool
	// Composites is scheduling.k8s.io/v1alpha3 CompositePodGroup
	// (CompositePodGroup, alpha).
	Composites bool
}

// Discover asks the API server which optional APIs it serves.
func Discover(client kubernetes.Interface) (Served, error) {
	var s Served
	var err error
	if s.DeviceTaintRules, err = ResourceServed(client.Discovery(), "resource.k8s.io/v1", "devicetaintrules"); err != nil {
		return s, err
	}
	if s.Workloads, err = ResourceServed(client.Discovery(), "scheduling.k8s.io/v1beta1", "podgroups"); err != nil {
		return s, err
	}
	if s.Composites, err = ResourceServed(client.Discovery(), "scheduling.k8s.io/v1alpha3", "compositepodgroups"); err != nil {
		return s, err
	}
	return s, nil
}

// ResourceServed tells whether the API server serves resource in the
// group version gv (a CRD that is installed, an API that is enabled). A
// group version that is not served is not an error.
func ResourceServed(d discovery.DiscoveryInterface, gv, resource string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

// dropManagedFields is the informers' transform: server-side apply's
// field ownership is often the largest part of an object and nothing in
// the autoscaler reads it, so the caches (and every copy the snapshot
// shares) do not keep it.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// New sets up the informers for what the cluster serves.
func New(client kubernetes.Interface, served Served) *Observer {
	o := &Observer{
		factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(new(sharer).transform)),
		served:  served,
		trigger: make(chan struct{}, 1),
	}
	o.listers = newListers(o.factory, served)
	o.scaleDown = newScaleDownListers(o.factory)
	_, _ = o.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.maybeTrigger(obj) },
		UpdateFunc: func(_, obj any) { o.maybeTrigger(obj) },
	})
	return o
}

// OnPods has fn told of every pod the informers add or update, from the
// first list on, so that work on a pod can be done when it changes rather
// than in a pass. Call it before Start, which waits until fn has seen the
// first list. fn runs on the informer's goroutine: it must be quick.
func (o *Observer) OnPods(fn func(*corev1.Pod)) error {
	call := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			fn(pod)
		}
	}
	reg, err := o.factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, obj any) { call(obj) },
	})
	if err != nil {
		return fmt.Errorf("pod handler: %w", err)
	}
	o.handlers = append(o.handlers, reg)
	return nil
}

// OnSlices has warm told of every ResourceSlice the informers add, and of
// the new object of every update, and gone of every slice deleted or
// replaced, so that what a pass reads of a slice can be made as it
// arrives. Call it before Start, which waits until warm has seen the
// first list. Both run on the informer's goroutine: they must be quick.
func (o *Observer) OnSlices(warm, gone func(*resourceapi.ResourceSlice)) error {
	return onObjects(o, o.factory.Resource().V1().ResourceSlices().Informer(), "slice", warm, gone)
}

// OnClaims is OnSlices for ResourceClaims (the snapshot indexes their
// allocations as they arrive).
func (o *Observer) OnClaims(warm, gone func(*resourceapi.ResourceClaim)) error {
	return onObjects(o, o.factory.Resource().V1().ResourceClaims().Informer(), "claim", warm, gone)
}

// onObjects registers warm and gone with inf as OnSlices says.
func onObjects[T any](o *Observer, inf cache.SharedIndexInformer, kind string, warm, gone func(T)) error {
	call := func(fn func(T), obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if x, ok := obj.(T); ok {
			fn(x)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { call(warm, obj) },
		UpdateFunc: func(old, obj any) { call(gone, old); call(warm, obj) },
		DeleteFunc: func(obj any) { call(gone, obj) },
	})
	if err != nil {
		return fmt.Errorf("%s handler: %w", kind, err)
	}
	o.handlers = append(o.handlers, reg)
	return nil
}

// Start starts the informers and waits for their caches, and for the
// OnPods, OnSlices and OnClaims handlers to have seen them.
func (o *Observer) Start(ctx context.Context, timeout time.Duration) error {
	o.factory.Start(ctx.Done())
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for typ, ok := range o.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache of %v did not sync within %s", typ, timeout)
		}
	}
	for _, reg := range o.handlers {
		if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
			return fmt.Errorf("event handlers did not see the first lists within %s", timeout)
		}
	}
	klog.FromContext(ctx).V(2).Info("Informers synced", "served", o.served)
	return nil
}

// Shutdown stops the informers (after the context given to Start is done).
func (o *Observer) Shutdown() { o.factory.Shutdown() }

// Triggered fires when a pod has just been found unschedulable: the loop
// may run before its next tick.
func (o *Observer) Triggered() <-chan struct{} { return o.trigger }

func (o *Observer) maybeTrigger(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !IsUnschedulable(pod) {
		return
	}
	select {
	case o.trigger <- struct{}{}:
	default:
	}
}

// Observe lists the current state from the caches.
func (o *Observer) Observe() (*ClusterState, error) {
	return o.listers.list()
}

// IsUnschedulable reports a pod the scheduler tried and could not place:
// found unschedulable, or failed with an error (the gang cycle reports
// some rejections that way, and such a pod may still need capacity; if it
// fits what exists, the fit-existing stage drops it).
func IsUnschedulable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse &&
				(c.Reason == corev1.PodReasonUnschedulable || c.Reason == corev1.PodReasonSchedulerError)
		}
	}
	return false
}

var everything = labels.Everything()
