package estimator

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// maxWindow bounds how many open nodes one framework call filters. Each
// call pays PreFilter and the claim preparation once, and the Filter pass
// runs its nodes in parallel, so wide windows are cheaper as long as most
// of their nodes reject the pod, which is the common case (the nodes a
// class tries first are the ones other classes filled); only the first
// fit is used. Measured on BenchmarkEstimateAllGroups: 2 → 1.33 s,
// 16 → 1.01 s, 32 → 0.98 s, 64 → 0.99 s.
const maxWindow = 32

// run is the state of one estimate.
type run struct {
	ctx      context.Context
	e        *Estimator
	snap     *snapshot.Snapshot
	tmpl     *cloudprovider.NodeTemplate
	group    string
	res      *Estimate
	deadline time.Time
	// nodes are the hypothetical nodes kept so far, in opening order.
	nodes    []*hnode
	nextName int
	// lazy: copied placements on new nodes stay virtual (lazy.go).
	lazy bool
	// perPod: every pod tries every node, its class's earlier pods'
	// failures forgotten (the EstimateClasses shortcut off).
	perPod   bool
	maxNodes int // 0: no limit
	memo     *memo
	calls    int // framework calls, for the log
	// sharedDrivers are the drivers with slices not bound to a node
	// (built on first use, see captureSlot).
	sharedDrivers map[string]bool
	// requestSize, for a group whose provider picks labels per request,
	// is how many nodes share one request's values: its unit size, or
	// all of them; 0 for other groups. requests are the templates of its
	// requests in opening order, each with values of its own
	// (requestTemplate).
	requestSize int
	requests    []*cloudprovider.NodeTemplate
	// order and at are the estimate's order and the index in it of the
	// pod being placed, which the unplaced runs are cut from.
	order []*v1.Pod
	at    int
}

// hnode is one hypothetical node of the estimate.
type hnode struct {
	name  string
	index int
	// state identifies the node's content for the memo: nodes with the
	// same state hold the same pods and allocations up to naming.
	// stateUnique marks content no other node is known to share.
	state int
	// selector pins allocations to the node (built on first use).
	selector *v1.NodeSelector
	// virtual nodes exist only here, not in the snapshot yet: their
	// content is known from the memo, so the framework never needs to
	// look at them until one becomes a candidate (see lazy.go). pending
	// holds the placements to write when it is materialised.
	virtual bool
	pending []pendingCopy
	// used lists the template devices placed pods' claims took here
	// (Estimate.DevicesUsed), each once. Nodes copied alike share it
	// (transition.usedAfter), so it is appended to, never written in
	// place, and kept without spare room once shared.
	used []usedDevice
	// tmpl is what the node is an instance of: the run's template, or
	// its request's (requestTemplate).
	tmpl *cloudprovider.NodeTemplate
}

// usedDevice is a template device of a new node.
type usedDevice struct{ driver, pool, device string }

// use records a device as taken; a node has a few dozen devices, so a
// linear scan beats a map. The list starts with room for the 8
// accelerators of a typical GPU node, rather than growing to it in four
// allocations on each of thousands of nodes.
func (n *hnode) use(d usedDevice) {
	if !slices.Contains(n.used, d) {
		if n.used == nil {
			n.used = make([]usedDevice, 0, 8)
		}
		n.used = append(n.used, d)
	}
}

// requestSize is run.requestSize for tmpl.
func requestSize(tmpl *cloudprovider.NodeTemplate) int {
	if len(tmpl.PerRequestLabels()) == 0 {
		return 0
	}
	if size, _ := tmpl.UnitSize(); size > 1 {
		return size
	}
	return math.MaxInt // one request: the whole scale-up
}

// newNodeName returns the next "<group>-template-<i>" not in the snapshot.
func (r *run) newNodeName() string {
	for {
		name := fmt.Sprintf("%s-template-%d", r.group, r.nextName)
		r.nextName++
		if !r.snap.HasNode(name) {
			return name
		}
	}
}

// newNode returns a new empty node under a fresh name, stored in the
// snapshot unless virtual.
func (r *run) newNode(virtual bool) (*hnode, error) {
	n := &hnode{name: r.newNodeName(), index: len(r.nodes), state: stateEmpty, virtual: virtual}
	n.tmpl = r.requestTemplate(n)
	if virtual {
		return n, nil
	}
	return n, r.addToSnapshot(n)
}

// addToSnapshot instantiates the template as n and stores the node, its
// slices and its own pods (claims included).
func (r *run) addToSnapshot(n *hnode) error {
	return template.AddInstance(r.ctx, r.e.runner, n.tmpl, n.name)
}

// requestTemplate is the template n is an instance of. Where the provider
// picks labels per request, the nodes of one request (one unit, or the
// whole scale-up of a group without units) share values that no other
// request has, named after the node that opens it (names are unique in
// the snapshot): a pod needing only some value of the label (a node
// affinity naming it, pods following each other into one NVLink clique)
// fits there, as it will once the provider has picked one. Without such
// labels, the run's template.
func (r *run) requestTemplate(n *hnode) *cloudprovider.NodeTemplate {
	if r.requestSize == 0 {
		return r.tmpl
	}
	req := n.index / r.requestSize
	if n.index%r.requestSize == 0 {
		// No kept node in the request yet: n opens it, or opens it anew
		// (a node tried there and dropped named the last one).
		r.requests = r.requests[:req]
	}
	if req == len(r.requests) {
		r.requests = append(r.requests, template.WithLaunchLabels(r.tmpl, "new request opened by "+n.name))
	}
	return r.requests[req]
}

// keepNode makes a node part of the estimate.
func (r *run) keepNode(n *hnode) {
	r.nodes = append(r.nodes, n)
	r.res.NewNodes = append(r.res.NewNodes, n.name)
}

func (r *run) revertWith(err error) error {
	if rerr := r.snap.Revert(); rerr != nil {
		return fmt.Errorf("%w (and revert: %v)", err, rerr)
	}
	return err
}

// placed records a framework placement and what it teaches the memo.
func (r *run) placed(pod *v1.Pod, cls *class, n *hnode, placedPod *v1.Pod) {
	r.res.Placements = append(r.res.Placements, Placement{Pod: pod, Node: n.name})
	if cls.antiAffinity {
		// The new pod may now repel pods anywhere in its topology domain:
		// verdicts learnt so far no longer hold.
		r.memo.reset()
	}
	r.countDevices(placedPod, n)
	from := n.state
	n.state = stateUnique
	if from == stateUnique || !r.memo.usable(cls) {
		return
	}
	if s, ok := r.captureSlot(placedPod, n); ok {
		n.state = r.memo.fit(from, cls, s)
	}
}

// countDevices adds the template devices of n that placedPod's claims
// (including a claim made for its DRA-backed extended resources) hold.
func (r *run) countDevices(placedPod *v1.Pod, n *hnode) {
	seen := map[string]bool{}
	count := func(c *resourceapi.ResourceClaim) {
		if c == nil || seen[c.Name] || c.Status.Allocation == nil {
			return
		}
		seen[c.Name] = true
		for _, res := range c.Status.Allocation.Devices.Results {
			if pool, ok := r.templatePool(res.Driver, res.Pool, n.name); ok {
				n.use(usedDevice{res.Driver, pool, res.Device})
			} else {
				r.res.tookShared = true
			}
		}
	}
	for i := range placedPod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(placedPod, &placedPod.Spec.ResourceClaims[i]); err == nil && name != nil {
			c, _ := r.snap.ResourceClaims().Get(placedPod.Namespace, *name)
			count(c)
		}
	}
	for _, c := range r.snap.ClaimsOwnedBy(placedPod.UID) {
		count(c)
	}
}
