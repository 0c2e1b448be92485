package framework

import (
	"sync"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

// csiNodes is the CSINode lister the volume-limit plugin reads: the
// cluster's CSINodes, and for the hypothetical nodes the simulation adds
// (which no kubelet has registered) the CSINode their template implies, so
// a group whose nodes attach at most N volumes of a driver is judged by N,
// as the scheduler will judge the real node.
type csiNodes struct {
	real storagelisters.CSINodeLister
	mu   sync.RWMutex
	// templated are the hypothetical nodes' CSINodes by node name.
	templated map[string]*storagev1.CSINode
}

var _ storagelisters.CSINodeLister = (*csiNodes)(nil)

func (c *csiNodes) List(selector labels.Selector) ([]*storagev1.CSINode, error) {
	out, err := c.real.List(selector)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.templated {
		if selector.Matches(labels.Set(n.Labels)) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Get prefers what the cluster has: a registered node's own CSINode wins
// over its template's.
func (c *csiNodes) Get(name string) (*storagev1.CSINode, error) {
	n, err := c.real.Get(name)
	if err == nil || !apierrors.IsNotFound(err) {
		return n, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t, ok := c.templated[name]; ok {
		return t, nil
	}
	return nil, err
}

// SetTemplateCSINode gives the hypothetical node named node the CSINode
// of its template (nil: its template declares no CSI driver). Names are
// reused pass after pass, so the set stays as large as the simulation's
// widest pass.
func (r *Runner) SetTemplateCSINode(node string, tmpl *storagev1.CSINode) {
	r.csi.mu.Lock()
	defer r.csi.mu.Unlock()
	if tmpl == nil {
		delete(r.csi.templated, node)
		return
	}
	n := tmpl.DeepCopy()
	n.Name = node
	r.csi.templated[node] = n
}
