package buffers

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
)

// rediscoverEvery is how often a cluster without the CapacityBuffer CRD
// is asked again (it may be installed after the autoscaler starts).
const rediscoverEvery = time.Minute

// Watcher watches the buffers (a dynamic informer: no generated
// clientset) and, once the CRD is served, what they name: PodTemplates
// and the built-in workloads (other scalable kinds are read through their
// scale subresource when a buffer names them). ResourceQuotas are listed
// per namespace when asked, not watched: the autoscaler may be allowed to read them in some namespaces
// only (RBAC per namespace), and a namespace it cannot read must fail on
// its own, not take every namespace's quotas with it. Without the CRD it
// starts nothing and lists no buffer.
type Watcher struct {
	dyn    dynamic.Interface
	client kubernetes.Interface

	mu      sync.Mutex
	ctx     context.Context
	checked time.Time
	buffers cache.SharedIndexInformer
	listers *Listers
	core    informers.SharedInformerFactory
	dynf    dynamicinformer.DynamicSharedInformerFactory
}

var _ Source = &Watcher{}

// NewWatcher returns a watcher; Start begins it.
func NewWatcher(dyn dynamic.Interface, client kubernetes.Interface) *Watcher {
	return &Watcher{dyn: dyn, client: client}
}

// Start starts the informers if the CRD is served and waits for them.
func (w *Watcher) Start(ctx context.Context, timeout time.Duration) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	return w.ensure(timeout)
}

// Shutdown stops the informers (after Start's context ended).
func (w *Watcher) Shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.core != nil {
		w.core.Shutdown()
		w.dynf.Shutdown()
	}
}

func (w *Watcher) ensure(timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buffers != nil || w.ctx == nil || time.Since(w.checked) < rediscoverEvery {
		return nil
	}
	w.checked = time.Now()
	served, err := observe.ResourceServed(w.client.Discovery(), v1beta1.SchemeGroupVersion.String(), v1beta1.Resource.Resource)
	if err == nil && !served {
		klog.FromContext(w.ctx).V(2).Info("CapacityBuffer CRD not served; no buffers", "groupVersion", v1beta1.SchemeGroupVersion)
		return nil
	}
	if err != nil {
		return err
	}
	dynf := dynamicinformer.NewDynamicSharedInformerFactory(w.dyn, 0)
	buffers := dynf.ForResource(v1beta1.Resource).Informer()
	core := informers.NewSharedInformerFactory(w.client, 0)
	l := &Listers{
		PodTemplates: core.Core().V1().PodTemplates().Lister(),
		Deployments:  core.Apps().V1().Deployments().Lister(),
		ReplicaSets:  core.Apps().V1().ReplicaSets().Lister(),
		StatefulSets: core.Apps().V1().StatefulSets().Lister(),
		Jobs:         core.Batch().V1().Jobs().Lister(),
		// Other kinds through their scale subresource, mapped to their
		// resource by discovery (cached; an unknown kind asks again).
		Scales: &Scales{Dynamic: w.dyn, Client: w.client, Context: w.ctx,
			Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(w.client.Discovery()))},
	}
	l.List = func() []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for _, obj := range buffers.GetStore().List() {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				out = append(out, u)
			}
		}
		return out
	}
	dynf.Start(w.ctx.Done())
	core.Start(w.ctx.Done())
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), buffers.HasSynced) {
		return context.DeadlineExceeded
	}
	for _, ok := range core.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return context.DeadlineExceeded
		}
	}
	klog.FromContext(w.ctx).Info("Serving CapacityBuffers", "groupVersion", v1beta1.SchemeGroupVersion)
	w.buffers, w.listers, w.core, w.dynf = buffers, l, core, dynf
	return nil
}

func (w *Watcher) current() *Listers {
	if err := w.ensure(30 * time.Second); err != nil {
		klog.Background().V(2).Info("CapacityBuffer informers not started; retried later", "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.listers
}

// Buffers lists the buffers (none without the CRD).
func (w *Watcher) Buffers() []*unstructured.Unstructured {
	if l := w.current(); l != nil {
		return l.Buffers()
	}
	return nil
}

// PodTemplate gets a PodTemplate.
func (w *Watcher) PodTemplate(namespace, name string) (*corev1.PodTemplate, error) {
	l := w.current()
	if l == nil {
		return nil, errNotWatching
	}
	return l.PodTemplate(namespace, name)
}

// Workload reads a scalableRef's workload.
func (w *Watcher) Workload(namespace string, ref v1beta1.ScalableRef) (*Workload, error) {
	l := w.current()
	if l == nil {
		return nil, errNotWatching
	}
	return l.Workload(namespace, ref)
}

// quotaListTimeout bounds one namespace's quota listing in a pass.
const quotaListTimeout = 10 * time.Second

// Quotas lists a namespace's ResourceQuotas from the API server (from its
// watch cache: resourceVersion 0). An error, a refusal by RBAC included,
// is the caller's to treat as no room.
func (w *Watcher) Quotas(namespace string) ([]*corev1.ResourceQuota, error) {
	if w.current() == nil {
		return nil, errNotWatching
	}
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, quotaListTimeout)
	defer cancel()
	list, err := w.client.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.ResourceQuota, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

var errNotWatching = errors.New("CapacityBuffers are not watched (CRD not served)")
