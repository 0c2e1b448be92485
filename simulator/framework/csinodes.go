package framework

import (
	"sync"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// csiNodes is the CSINode lister the volume-limit plugin reads: the
// cluster's CSINodes, and for the hypothetical nodes the simulation adds
// (which no kubelet has registered) the CSINode their template implies, so
// a group whose nodes attach at most N volumes of a driver is judged by N,
// as the scheduler will judge the real node.
type csiNodes struct {
	real storagelisters.CSINodeLister
	snap *snapshot.Snapshot
	mu   sync.RWMutex
	// templated are the hypothetical nodes' CSINodes by node name, set
	// at the snapshot's epoch (snapshot.Epoch). A Reset empties the
	// snapshot of its hypothetical nodes, and the pass after it sets
	// those it adds again (template.AddInstance, the load of booting
	// nodes): what an earlier epoch set is never read, and is dropped at
	// the first set of the next, so names of nodes that booted once, or
	// of groups long gone, do not pile up.
	templated map[string]*storagev1.CSINode
	epoch     uint64
}

var _ storagelisters.CSINodeLister = (*csiNodes)(nil)

// current returns the templated CSINodes of the snapshot's epoch. The
// caller holds mu.
func (c *csiNodes) current() map[string]*storagev1.CSINode {
	if c.epoch != c.snap.Epoch() {
		return nil
	}
	return c.templated
}

func (c *csiNodes) List(selector labels.Selector) ([]*storagev1.CSINode, error) {
	out, err := c.real.List(selector)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, n := range c.current() {
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
	if t, ok := c.current()[name]; ok {
		return t, nil
	}
	return nil, err
}

// SetTemplateCSINode gives the hypothetical node named node the CSINode
// of its template (nil: its template declares no CSI driver) until the
// snapshot's next Reset: the set holds one pass's hypothetical nodes.
func (r *Runner) SetTemplateCSINode(node string, tmpl *storagev1.CSINode) {
	c := r.csi
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.snap.Epoch(); e != c.epoch {
		c.templated, c.epoch = map[string]*storagev1.CSINode{}, e
	}
	if tmpl == nil {
		delete(c.templated, node)
		return
	}
	n := tmpl.DeepCopy()
	n.Name = node
	c.templated[node] = n
}
