package estimator

import (
	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// Carrying an estimate into a later planning round.
//
// A planner estimates every group, keeps the chosen group's nodes
// (EstimateAndKeep) and estimates the other groups again over the pods
// left. Carry says when a group's earlier estimate is, exactly, what the
// second estimate would give, so that it need not run. Three things may
// differ between the two estimates; each has its rule.
//
// The pods. The new pods must be the earlier ones less some (dropped)
// that the earlier estimate left unplaced, or less every pod it placed
// (the next paragraph). Why dropping unplaced pods leaves the rest as it
// was: pods are binpacked in a fixed order (order.go) in which the pods
// of one class are next to each other and keep their relative order when
// others go; within a class the estimate places a prefix of the pods and
// leaves the rest unplaced, all for the same cause (the class does not
// fit an empty node, or the node cap is reached with every open node
// closed to the class), with no node changed in between. A dropped pod is
// one of those left: the next pod of its class, if any, meets the state it
// met and ends the same way; if none is left, what the dropped pod's
// failing attempts changed (the class's own closed nodes and memoized
// failures, virtual nodes materialised, an unused node added and removed)
// is read by no later pod of another class. The estimate's placements,
// nodes and devices stay, its unplaced pods lose the dropped ones, and
// Limited is what the remaining unplaced pods say. Not for estimates a
// deadline cut short (where they stop depends on time), nor for
// templates whose own pods claim devices (removing an unused node leaves
// their claims behind, which a later node of the same name finds).
//
// Every pod placed dropped (the round's choice took every pod this group
// would have taken): what is left are pods whose class did not fit an
// empty node, and a fresh estimate gives each class that verdict again on
// its first empty node, opening none, when the verdict read nothing the
// dropped placements or the node's name decide (an Independent pod's
// verdict on an empty node reads that node, its template's pods and the
// devices of slices bound to no node). So not when a placement took a
// device of a slice bound to no node (tookShared), when an unplaced class
// may read node names (nameRead: its verdict was given on a node named
// after the nodes then open, a fresh estimate asks a node of another
// name; so also not for a group whose provider picks labels per request,
// their values named after the node opening the request), or when the
// cap stopped a pod.
//
// The cap. The node cap decides only "may the estimate open one more
// node" at node counts 0..NodeCount (0 when every placement is dropped);
// two caps that answer alike there give the same run (sameCap).
//
// The snapshot. The new estimate sees the kept nodes and pods. Its
// candidates are only its own new nodes, so what the kept nodes hold
// matters only through rules that read other nodes: inter-pod affinity
// and topology spread of the pods placed, required anti-affinity of the
// pods kept, claims and volumes shared between pods, gang state, and
// devices not local to one node. Independent (of every pod estimated) and
// KeptLocal (of what was kept) rule each of those out. What stays is
// node-local (resources, ports, taints, the kept nodes' own pools, named
// after them, which no allocation on another node can use) or not read by
// a verdict (a simulated claim's name, which a taken name only changes).
// Node names: the earlier estimate's names must still be free, which
// Carry checks (kept nodes are named after their own group, so they are).
//
// TestCarryMatchesEstimatingAgain checks the pod and cap rules against
// fresh estimates; pkg/scaleup/plan's TestCarryIsExact checks whole plans.

// Independent reports whether pod's verdict on a node depends on nothing
// but that node, its template's claims and the devices of slices not
// bound to a node: no inter-pod affinity or anti-affinity (required or
// preferred), no topology spread (its own or the profile's), no gang, no
// persistent or ephemeral volumes, and only claims still to be made from
// a template (a named or already made claim may be one that other pods
// allocate).
func (e *Estimator) Independent(pod *v1.Pod) bool {
	if pod.Spec.SchedulingGroup != nil || len(spreadOf(pod, e.runner.Profile())) > 0 {
		return false
	}
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return false
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil {
			return false
		}
	}
	if len(pod.Status.ResourceClaimStatuses) > 0 {
		return false
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil || c.ResourceClaimTemplateName == nil {
			return false
		}
	}
	return true
}

// Mark is the state of what every node's verdict may read (the shared
// part of snapshot.Gen), taken before keeping nodes.
type Mark struct{ shared uint64 }

// Mark returns the snapshot's mark now.
func (e *Estimator) Mark() Mark {
	return Mark{shared: e.runner.Snapshot().NodeGen("").Shared}
}

// KeptLocal reports whether what EstimateAndKeep kept since m (res, the
// new nodes of tmpl) leaves the verdict of every Independent pod on
// every other node as it was: nothing shared changed (devices of slices
// not bound to a node, device classes, taint rules) and no kept pod, its
// template's pods included, has required anti-affinity (which would
// repel pods from other nodes of its domain) or names a claim (which may
// be one some pod left owns).
func (e *Estimator) KeptLocal(m Mark, res *Estimate, tmpl *cloudprovider.NodeTemplate) bool {
	if e.Mark() != m {
		return false
	}
	for _, p := range res.Placements {
		if !e.Independent(p.Pod) {
			return false
		}
	}
	for _, p := range tmpl.Pods {
		if usesRequiredAntiAffinity(p) || len(p.Spec.ResourceClaims) > 0 {
			return false
		}
	}
	return true
}

// Carry returns prev, an estimate of group g, as the estimate of g over
// prev's pods less dropped, with g.MaxNodes as the cap now; ok is false
// when that is not provably what estimating again would give (see the
// top of this file). The caller vouches for the rest: every pod of prev
// is Independent, dropped are pods of prev, and the snapshot changed only
// by keeps that KeptLocal approved.
func (e *Estimator) Carry(prev *Estimate, g TemplateGroup, dropped *Dropped) (*Estimate, bool) {
	if !e.opts.Shortcuts.On(shortcut.Carry) || prev == nil || prev.Limited == LimitMaxDuration || prev.group != g.Name {
		return nil, false
	}
	for _, p := range g.Template.Pods {
		if len(p.Spec.ResourceClaims) > 0 {
			return nil, false
		}
	}
	placed := 0
	if dropped.len() > 0 {
		for _, pl := range prev.Placements {
			if dropped.has(pl.Pod) {
				placed++
			}
		}
	}
	emptied := placed > 0
	if emptied && (placed < len(prev.Placements) || prev.tookShared || prev.nameRead || requestSize(g.Template) != 0) {
		return nil, false
	}
	nodes := prev.NodeCount
	if emptied {
		nodes = 0
	}
	if !sameCap(prev.maxNodes, e.maxNodes(g), nodes) {
		return nil, false
	}
	snap := e.runner.Snapshot()
	for _, names := range [][]string{prev.NewNodes, prev.droppedNodes} {
		for _, n := range names {
			if snap.HasNode(n) {
				return nil, false
			}
		}
	}
	out := *prev
	out.Unplaced = prev.Unplaced.shared()
	out.FrameworkCalls, out.MemoHits = 0, 0
	if dropped.len() == 0 {
		return &out, true
	}
	f := dropped.without(prev.Unplaced)
	if f.found+placed != dropped.len() {
		return nil, false
	}
	out.Unplaced, out.Limited = f.left, f.limited
	if emptied {
		// A pod the cap stopped would now open a node.
		if out.Limited != "" {
			return nil, false
		}
		out.NodeCount, out.NewNodes, out.Placements, out.DevicesUsed = 0, nil, nil, 0
	}
	return &out, true
}

// Dropped is a set of pods, matched by pointer (cheaper than by UID): the
// pods gone from a round's input, made once for the hundred groups Carry
// is asked about. It keeps what it made of each run of unplaced pods and
// of each list: the groups estimated over one order have the same runs
// (UnplacedPods), alike groups the same lists, so a run is filtered once
// per round, not once per group.
type Dropped struct {
	pods  map[*v1.Pod]bool
	runs  map[sliceID[*v1.Pod]]keptRun // by the run's pods
	lists map[sliceID[unplacedRun]]filtered
}

// keptRun is a run's pods less the dropped ones, and how many it dropped.
type keptRun struct {
	pods  []*v1.Pod
	found int
}

// filtered is a list less the dropped pods: what is left, how many were
// dropped, and the limit the pods left say.
type filtered struct {
	left    UnplacedPods
	found   int
	limited string
}

// DroppedOf is the set of pods.
func DroppedOf(pods []*v1.Pod) *Dropped {
	d := &Dropped{pods: make(map[*v1.Pod]bool, len(pods)), runs: map[sliceID[*v1.Pod]]keptRun{}, lists: map[sliceID[unplacedRun]]filtered{}}
	for _, p := range pods {
		d.pods[p] = true
	}
	return d
}

func (d *Dropped) len() int {
	if d == nil {
		return 0
	}
	return len(d.pods)
}

func (d *Dropped) has(p *v1.Pod) bool { return d != nil && d.pods[p] }

// without is list less the dropped pods.
func (d *Dropped) without(list UnplacedPods) filtered {
	if len(list.runs) == 0 {
		return filtered{}
	}
	key := idOf(list.runs)
	if f, ok := d.lists[key]; ok {
		return f
	}
	var f filtered
	for _, r := range list.runs {
		k := d.run(r.pods)
		f.found += k.found
		if len(k.pods) == 0 {
			continue
		}
		if r.limit != "" {
			f.limited = r.limit
		}
		f.left.addRun(k.pods, r.result, r.limit)
	}
	// Shared by every group that had the list: no append may reach
	// another's runs.
	f.left = f.left.shared()
	d.lists[key] = f
	return f
}

// run is pods less the dropped ones: pods itself when none is dropped.
func (d *Dropped) run(pods []*v1.Pod) keptRun {
	key := idOf(pods)
	if k, ok := d.runs[key]; ok {
		return k
	}
	k := keptRun{pods: pods}
	for i, p := range pods {
		if !d.pods[p] {
			continue
		}
		left := make([]*v1.Pod, i, len(pods)-1)
		copy(left, pods[:i])
		for _, q := range pods[i:] {
			if d.pods[q] {
				k.found++
			} else {
				left = append(left, q)
			}
		}
		k.pods = left
		break
	}
	d.runs[key] = k
	return k
}

// sameCap reports whether caps a and b (0: none) answer "may one more node
// open" alike at every node count from 0 to n.
func sameCap(a, b, n int) bool {
	eff := func(c int) int {
		if c <= 0 || c > n {
			return n + 1
		}
		return c
	}
	return eff(a) == eff(b)
}
