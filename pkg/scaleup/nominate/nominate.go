// Package nominate tells the real scheduler where the plan put pending
// pods. When a node a scale-up added registers, the pods the plan placed on
// that node get status.nominatedNodeName (KEP-5278 lets components other
// than the scheduler set it); pods the plan placed on nodes of its groups
// that are usable now (the fit-existing stage's fragmentation-aware
// choice, a gang's members on existing room) get it too. The scheduler
// tries a pod's nominated node first and keeps that room from pods of
// equal or lower priority, so gangs land in the domain they were planned
// for and partly used GPUs are filled as ranked.
//
// Only the autoscaler's nominations are ever changed. One the scheduler
// did not follow within the timeout is cleared if it still names our node;
// one someone else replaced (the scheduler's preemption) is left alone.
// What was planned lives in memory only, but every nomination carries a
// pod condition (NominatedCondition) naming its node: a restarted
// autoscaler, or the next leader, recognises the nominations an earlier
// process left and clears them, and nominates only for its own plans.
package nominate

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
)

// Name is the stage's name; it runs after act's.
const Name = "nominate"

// Outcomes of a nomination, as nomination_outcomes_total labels them.
const (
	// Followed: the pod was bound to the node it was nominated for.
	Followed = "followed"
	// Ignored: the scheduler did not follow it: the pod was bound to
	// another node, or not bound within the timeout (then it is cleared).
	Ignored = "ignored"
	// Dropped: it ended for another reason: the pod or the node went,
	// another component nominated the pod elsewhere, or the node never
	// became usable.
	Dropped = "dropped"
)

// Outcomes are every outcome, for the metric's initial values.
var Outcomes = []string{Followed, Ignored, Dropped}

// OutcomeCounter counts outcomes (a Prometheus CounterVec fits).
type OutcomeCounter interface {
	Inc(outcome string)
}

// Options configure the nominator.
type Options struct {
	// Timeout is how long a nomination may stand on a usable node
	// without the pod being bound there (--nomination-timeout).
	Timeout time.Duration
	// MaxWait is how long a planned node may take to register and become
	// usable (--max-node-provision-time): past it, nominations to it go.
	MaxWait time.Duration
	// MaxWrites bounds the pod writes (nominations set or cleared) of one
	// pass (--max-nomination-writes-per-pass); 0: no bound. Each is an API
	// call at the client's QPS, and one pass may place thousands of pods.
	MaxWrites int
}

// Nominator remembers what the plans placed and keeps the pods'
// nominations in step. Not safe for concurrent use: the loop runs it.
type Nominator struct {
	client   kubernetes.Interface
	opts     Options
	outcomes OutcomeCounter
	// ups are scale-ups with planned nodes not matched to registered ones.
	ups []*plannedUp
	// noms are the live nominations by pod UID.
	noms map[types.UID]*nomination
	// declined are the pods whose nomination the scheduler did not follow,
	// with that node: they are not nominated there again.
	declined map[types.UID]string
	// writes is what is left of the pass's MaxWrites (negative: no bound);
	// now is the pass's time, for the conditions written.
	writes int
	now    time.Time
}

// New returns a nominator patching pods through client.
func New(client kubernetes.Interface, opts Options, outcomes OutcomeCounter) *Nominator {
	return &Nominator{client: client, opts: opts, outcomes: outcomes, noms: map[types.UID]*nomination{}, declined: map[types.UID]string{}}
}

type podRef struct {
	uid             types.UID
	namespace, name string
}

func ref(p *corev1.Pod) podRef { return podRef{uid: p.UID, namespace: p.Namespace, name: p.Name} }

// plannedUp is one scale-up that was made, with its nodes as planned.
type plannedUp struct {
	group string
	at    time.Time
	// instances are the ids the provider named, in the order it created
	// them (none: it named none); before are the group's registered
	// nodes when it was made.
	instances []string
	before    map[string]bool
	nodes     []plannedNode
}

type plannedNode struct {
	pods []podRef
	// node is the registered node matched to it, "" until one is.
	node string
}

// nomination is one pod nominated (or to be) for one node.
type nomination struct {
	pod  podRef
	node string
	// since is when it was made; usable when the node was first seen
	// usable (zero until then).
	since, usable time.Time
	// set: the pod has carried it.
	set bool
	// added: the node is one a scale-up added for the pod, whose room
	// nothing else holds; such nominations are written first.
	added bool
}

// StepInput is what one pass tells the nominator.
type StepInput struct {
	Pods   []*corev1.Pod
	Nodes  []*corev1.Node
	Groups []*nodegroups.Info
	// Results are the pass's scale-ups, Placed the pending pods it placed
	// on existing or coming nodes (by node name).
	Results []act.LaunchResult
	Placed  map[*corev1.Pod]string
	Now     time.Time
}

// Stage runs the nominator as a stage of the pass, after act (so that a
// pass's own scale-ups are recorded before their nodes can register). It
// writes pods, so a dry run leaves it out.
func (n *Nominator) Stage() pass.Stage {
	return pass.Func{ID: Name, Acting: true,
		In: pass.Keys(observe.Cluster, nodegroups.Groups, act.Results, fitexisting.Fits, plan.Gangs),
		Do: func(ctx context.Context, st *pass.State) error {
			cluster := pass.Get(st, observe.Cluster)
			fits := pass.Get(st, fitexisting.Fits)
			in := StepInput{Pods: cluster.Pods, Nodes: cluster.Nodes, Groups: pass.Get(st, nodegroups.Groups), Results: pass.Get(st, act.Results),
				Now: st.Started, Placed: make(map[*corev1.Pod]string, len(fits))}
			for pod, node := range fits {
				in.Placed[pod] = node
			}
			for _, g := range pass.Get(st, plan.Gangs) {
				for pod, node := range g.Existing {
					in.Placed[pod] = node
				}
			}
			n.Step(ctx, in)
			return nil
		}}
}

// Step records the pass's scale-ups, matches planned nodes to the nodes
// that registered, and sets, keeps or ends each nomination.
func (n *Nominator) Step(ctx context.Context, in StepInput) {
	v := newView(in)
	n.record(ctx, in.Results, in.Now)
	n.match(v, in.Now)
	pods := make([]*corev1.Pod, 0, len(in.Placed))
	for pod := range in.Placed {
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool { return key(ref(pods[i])) < key(ref(pods[j])) })
	for _, pod := range pods {
		// Only nodes usable now: a coming node's name is the simulation's.
		if node := in.Placed[pod]; v.usable[node] {
			n.want(ref(pod), node, false, v, in.Now)
		}
	}
	n.settle(ctx, v, in.Now)
}

// record keeps each scale-up that added nodes and says which pods go on
// which of them.
func (n *Nominator) record(ctx context.Context, results []act.LaunchResult, now time.Time) {
	for _, r := range results {
		if r.Added <= 0 || len(r.Nodes) == 0 || r.Group == nil {
			continue
		}
		up := &plannedUp{group: r.Group.Id, at: now, before: map[string]bool{}}
		up.instances = append(up.instances, r.Instances...)
		for _, node := range append(append([]*corev1.Node(nil), r.Group.Ready...), r.Group.Booting...) {
			up.before[node.Name] = true
		}
		// A partial scale-up: the nodes it got take the first planned.
		for _, pods := range r.Nodes[:min(r.Added, len(r.Nodes))] {
			pn := plannedNode{}
			for _, p := range pods {
				pn.pods = append(pn.pods, ref(p))
			}
			up.nodes = append(up.nodes, pn)
		}
		n.ups = append(n.ups, up)
		logger(ctx).V(2).Info("Scale-up's planned nodes recorded for nominations", "nodeGroup", up.group, "nodes", len(up.nodes), "instances", len(r.Instances))
	}
}

// match gives each planned node a registered node of its group that the
// scale-up created (named by the provider, or new since it was made) and
// no other planned node has, in creation order (newNodes); the group's
// new nodes are alike, so what matters is that each is used once. The
// pods planned there are then nominated. Scale-ups are remembered for
// MaxWait, the time their nodes have to come, so their nodes stay theirs.
func (n *Nominator) match(v *view, now time.Time) {
	claimed := map[string]bool{}
	for _, up := range n.ups {
		for _, pn := range up.nodes {
			if pn.node != "" {
				claimed[pn.node] = true
			}
		}
	}
	kept := n.ups[:0]
	for _, up := range n.ups {
		if now.Sub(up.at) >= n.opts.MaxWait {
			continue
		}
		kept = append(kept, up)
		var free []string
		for i := range up.nodes {
			pn := &up.nodes[i]
			if pn.node != "" {
				continue
			}
			if free == nil {
				free = v.newNodes(up, claimed)
			}
			if len(free) == 0 {
				break
			}
			pn.node, free = free[0], free[1:]
			claimed[pn.node] = true
			for _, p := range pn.pods {
				n.want(p, pn.node, true, v, now)
			}
		}
	}
	n.ups = kept
}

// want starts a nomination of pod for node, unless the pod is not pending,
// already has one of ours, or did not follow one to this node before.
func (n *Nominator) want(p podRef, node string, added bool, v *view, now time.Time) {
	pod := v.pods[p.uid]
	if pod == nil || pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return
	}
	if n.noms[p.uid] != nil || n.declined[p.uid] == node {
		return
	}
	n.noms[p.uid] = &nomination{pod: p, node: node, since: now, added: added}
}

func key(p podRef) string { return p.namespace + "/" + p.name }

// view is one pass's cluster as the nominator reads it.
type view struct {
	pods   map[types.UID]*corev1.Pod
	nodes  map[string]*corev1.Node
	usable map[string]bool
	// stale are booting nodes past the provision time: no longer coming.
	stale  map[string]bool
	groups map[string]*nodegroups.Info
}

func newView(in StepInput) *view {
	v := &view{pods: map[types.UID]*corev1.Pod{}, nodes: map[string]*corev1.Node{}, usable: map[string]bool{}, stale: map[string]bool{},
		groups: map[string]*nodegroups.Info{}}
	for _, p := range in.Pods {
		v.pods[p.UID] = p
	}
	for _, node := range in.Nodes {
		v.nodes[node.Name] = node
	}
	// Usable as nodegroups judged it: Ready and its drivers' pools
	// complete. Only the nodes of the groups this autoscaler scales are
	// nominated for: nodes of no group are not its to plan on.
	for _, g := range in.Groups {
		v.groups[g.Id] = g
		for _, node := range g.Ready {
			v.usable[node.Name] = true
		}
		for name := range g.Stale {
			v.stale[name] = true
		}
	}
	return v
}

// newNodes are the registered nodes of up's group that up created and
// nobody claimed, in the order they were created (the provider's order
// of the instances it named, else creation time, then name): the first
// planned node, the fullest, goes to the node likely to be usable first.
func (v *view) newNodes(up *plannedUp, claimed map[string]bool) []string {
	g := v.groups[up.group]
	if g == nil {
		return nil
	}
	index := make(map[string]int, len(up.instances))
	for i, id := range up.instances {
		index[id] = i
	}
	var nodes []*corev1.Node
	for _, node := range append(append([]*corev1.Node(nil), g.Ready...), g.Booting...) {
		if up.before[node.Name] || claimed[node.Name] {
			continue
		}
		if len(up.instances) > 0 {
			i, ok := index[node.Spec.ProviderID]
			if !ok {
				i, ok = index[node.Name]
			}
			if !ok {
				continue
			}
			index[node.Name] = i
		}
		nodes = append(nodes, node)
	}
	sort.Slice(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if ia, ib := index[a.Name], index[b.Name]; ia != ib {
			return ia < ib
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	out := make([]string, len(nodes))
	for i, node := range nodes {
		out[i] = node.Name
	}
	return out
}

// logger is the pass's logger for this stage.
func logger(ctx context.Context) klog.Logger { return klog.FromContext(ctx).WithName(Name) }
