package observe

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
)

// rediscoverEvery is how often a cluster without the CapacityReservation
// CRD is asked again (the CRD may be installed after the autoscaler).
const rediscoverEvery = time.Minute

// CapacityReservations watches the CapacityReservation objects through a
// dynamic informer (no generated clientset). Without the CRD it lists
// nothing and looks again every minute.
type CapacityReservations struct {
	dyn       dynamic.Interface
	discovery discovery.DiscoveryInterface

	mu       sync.Mutex
	ctx      context.Context
	informer cache.SharedIndexInformer
	checked  time.Time
}

// NewCapacityReservations returns a watcher; Start begins it.
func NewCapacityReservations(dyn dynamic.Interface, disc discovery.DiscoveryInterface) *CapacityReservations {
	return &CapacityReservations{dyn: dyn, discovery: disc}
}

// Start starts the informer if the CRD is served and waits for its cache.
func (c *CapacityReservations) Start(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	return c.ensure(timeout)
}

func (c *CapacityReservations) ensure(timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.informer != nil || c.ctx == nil || time.Since(c.checked) < rediscoverEvery {
		return nil
	}
	c.checked = time.Now()
	served, err := ResourceServed(c.discovery, v1alpha1.SchemeGroupVersion.String(), v1alpha1.Resource.Resource)
	if err == nil && !served {
		klog.FromContext(c.ctx).V(2).Info("CapacityReservation CRD not served; only the cloud provider's reservations count", "groupVersion", v1alpha1.SchemeGroupVersion)
		return nil
	}
	if err != nil {
		return err
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	inf := f.ForResource(v1alpha1.Resource).Informer()
	f.Start(c.ctx.Done())
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return context.DeadlineExceeded
	}
	c.informer = inf
	return nil
}

// List returns the objects in the cache (shared: read-only).
func (c *CapacityReservations) List() []*unstructured.Unstructured {
	if err := c.ensure(30 * time.Second); err != nil {
		klog.Background().V(2).Info("CapacityReservation informer not started; retried later", "err", err)
	}
	c.mu.Lock()
	inf := c.informer
	c.mu.Unlock()
	if inf == nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, obj := range inf.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}
