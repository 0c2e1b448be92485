package provreq

import (
	"context"
	"fmt"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/clientset/versioned"
	provinformers "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/informers/externalversions"
	provlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Informers watch the requests and the PodTemplates their podSets name.
type Informers struct {
	requests  provinformers.SharedInformerFactory
	core      informers.SharedInformerFactory
	Requests  provlisters.ProvisioningRequestLister
	Templates corelisters.PodTemplateLister
}

// NewInformers registers the two informers.
func NewInformers(client versioned.Interface, kube kubernetes.Interface) *Informers {
	i := &Informers{
		requests: provinformers.NewSharedInformerFactory(client, 0),
		core:     informers.NewSharedInformerFactory(kube, 0),
	}
	i.Requests = i.requests.Autoscaling().V1().ProvisioningRequests().Lister()
	i.Templates = i.core.Core().V1().PodTemplates().Lister()
	return i
}

// Start starts the informers and waits for their caches.
func (i *Informers) Start(ctx context.Context, timeout time.Duration) error {
	i.requests.Start(ctx.Done())
	i.core.Start(ctx.Done())
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for typ, ok := range i.requests.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache of %v did not sync within %s", typ, timeout)
		}
	}
	for typ, ok := range i.core.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache of %v did not sync within %s", typ, timeout)
		}
	}
	return nil
}

// Shutdown stops the informers (after the context given to Start is done).
func (i *Informers) Shutdown() {
	i.requests.Shutdown()
	i.core.Shutdown()
}
