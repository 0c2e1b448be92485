package kwok

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeWatch is the provider's watch of the nodes carrying a group label:
// Refresh reads its cache instead of listing every node each pass (one
// LIST when it starts, then a watch). A cache may lag the API server, so
// a node missing from it is gone only once a GET says so (gone).
type nodeWatch struct {
	factory informers.SharedInformerFactory
	lister  corelisters.NodeLister
	synced  cache.InformerSynced
}

// startNodeWatch starts the watch; it stops with the provider's context.
func startNodeWatch(p *Provider) *nodeWatch {
	f := informers.NewSharedInformerFactoryWithOptions(p.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelNodeGroup }))
	inf := f.Core().V1().Nodes()
	w := &nodeWatch{factory: f, lister: inf.Lister(), synced: inf.Informer().HasSynced}
	f.Start(p.ctx.Done())
	return w
}

// nodes returns the group-labelled nodes once the cache has synced; ctx
// bounds the wait.
func (w *nodeWatch) nodes(ctx context.Context) ([]*corev1.Node, error) {
	if !cache.WaitForCacheSync(ctx.Done(), w.synced) {
		return nil, fmt.Errorf("kwok provider: the node watch has not synced: %w", context.Cause(ctx))
	}
	return w.lister.List(labels.Everything())
}

// gone reports whether node no longer exists in the API server: the
// watch's cache may not show a node registered a moment ago yet.
func (p *Provider) gone(ctx context.Context, node string) bool {
	_, err := p.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// stop waits for the watch's goroutines; the provider's context is
// cancelled already.
func (w *nodeWatch) stop() { w.factory.Shutdown() }
