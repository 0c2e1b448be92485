package framework

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Alike lets a pod group cycle try one placement of each kind and copy its
// outcome to the placements alike to it (the alikePlacements shortcut):
// a gang over template instances meets the same racks and blocks again
// and again, each a fresh copy of the same templates, and the cycle's
// cost would otherwise grow with the domains rather than with what
// differs between them. docs/design/caches.md has the rule.
type Alike struct {
	// Key is the kind of a placement of group t over nodes (in the
	// placement's order): placements with equal non-empty keys must give
	// the group's members the same outcome, node i of one standing for
	// node i of the other. "" is alike to nothing.
	Key func(t *GroupTree, nodes []string) string
	// Verify tries every placement anyway and reports, through Found, a
	// copy that differs from its own trial; the trial's outcome is used.
	Verify bool
	// Found is told of a copy that differs (Verify); Checked of every
	// copy compared. Either may be nil.
	Found   func(group, placement, got, want string)
	Checked func()
	// Class is the class of a member whose verdict on a node depends on
	// that node alone (the estimator's memoizable classes), "" for the
	// others. With Rejected, a Filter verdict "does not fit" for a class
	// is kept while the node's generation holds and read back for the
	// class's later members, of this gang and of later ones: first fit
	// tries each member on the nodes its predecessors filled, and every
	// run of the cycle on the cluster's full nodes again. Verify filters
	// anyway and compares.
	Class    func(pod *v1.Pod) string
	Rejected *Rejections
	// Idle tells, for a PodGroup's placement, the nodes that turn every
	// member down (rejections kept for every member's class at the
	// node's generation): first fit passes them by, so Key leaves them
	// out and a copy maps the other nodes in order. nil: none are.
	Idle func(t *GroupTree, node string) bool

	// copies counts the outcomes copied unchecked in one cycle.
	copies int
}

// copyOf is the outcome of placement rep carried to a placement alike to
// it, named name over nodes: every member on the node at the same
// position, every verdict likewise.
func (r *Runner) copyOf(rep *PlacementOutcome, name string, nodes []string) PlacementOutcome {
	return r.copyMapped(rep, name, nodes, rep.Nodes, nodes)
}

// copyMapped is copyOf with node from[i] standing for to[i] (the nodes
// that count: Idle ones left out on both sides).
func (r *Runner) copyMapped(rep *PlacementOutcome, name string, nodes, from, toNodes []string) PlacementOutcome {
	to := make(map[string]string, len(toNodes))
	for i, n := range from {
		to[n] = toNodes[i]
	}
	out := *rep
	out.Name, out.Nodes = name, nodes
	out.Members = r.copyMembers(rep.Members, to)
	if rep.Children != nil {
		out.Children = make([]*PodGroupResult, len(rep.Children))
		for i, c := range rep.Children {
			if c != nil {
				out.Children[i] = r.copyResult(c, to)
			}
		}
	}
	return out
}

func (r *Runner) copyResult(res *PodGroupResult, to map[string]string) *PodGroupResult {
	out := *res
	out.Placements = make([]PlacementOutcome, len(res.Placements))
	for i := range res.Placements {
		p := &res.Placements[i]
		nodes := make([]string, len(p.Nodes))
		for j, n := range p.Nodes {
			nodes[j] = to[n]
		}
		out.Placements[i] = r.copyOf(p, r.valueAt(p, nodes), nodes)
	}
	return &out
}

// valueAt names a child placement carried to nodes: the value, on the
// first of nodes, of the label whose value named it on its first node.
func (r *Runner) valueAt(p *PlacementOutcome, nodes []string) string {
	if p.Name == "" || len(p.Nodes) == 0 {
		return p.Name
	}
	from, err1 := r.snap.Get(p.Nodes[0])
	to, err2 := r.snap.Get(nodes[0])
	if err1 != nil || err2 != nil || from.Node() == nil || to.Node() == nil {
		return p.Name
	}
	for k, v := range from.Node().Labels {
		if v == p.Name {
			if w, ok := to.Node().Labels[k]; ok {
				return w
			}
		}
	}
	return p.Name
}

func (r *Runner) copyMembers(members []*ScheduleResult, to map[string]string) []*ScheduleResult {
	if members == nil {
		return nil
	}
	out := make([]*ScheduleResult, len(members))
	for i, m := range members {
		if m == nil {
			continue
		}
		c := &ScheduleResult{Node: to[m.Node], Results: make([]NodeResult, 0, len(m.Results))}
		for _, v := range m.Results {
			if n, ok := to[v.Node]; ok { // an Idle node's verdict has no counterpart
				v.Node = n
				c.Results = append(c.Results, v)
			}
		}
		if m.Pod != nil {
			pod := *m.Pod // the snapshot's: not modified, copied
			pod.Spec.NodeName = c.Node
			c.Pod = &pod
		}
		out[i] = c
	}
	return out
}

// tryAlike is tryPlacement for a placement whose key matched rep's: the
// copy, checked against a trial of its own with Verify.
func (r *Runner) tryAlike(alike *Alike, t *GroupTree, rep *PlacementOutcome, repState *schedframework.CycleState, name string, nodes []string,
	try func() (PlacementOutcome, *schedframework.CycleState, error)) (PlacementOutcome, *schedframework.CycleState, error) {
	from, to := rep.Nodes, nodes
	if t.Composite == nil && alike.Idle != nil {
		from, to = alike.busy(t, from), alike.busy(t, to)
		if len(from) != len(to) {
			// Not alike after all (a node's generation moved): tried.
			return try()
		}
	}
	out := r.copyMapped(rep, name, nodes, from, to)
	if !alike.Verify {
		alike.copies++
		return out, repState, nil
	}
	real, state, err := try()
	if err != nil {
		return real, state, err
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	if got, want := outcomeString(&out), outcomeString(&real); got != want && alike.Found != nil {
		alike.Found(t.String(), name, got, want)
	}
	return real, state, nil
}

// busy is nodes without the Idle ones.
func (a *Alike) busy(t *GroupTree, nodes []string) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if !a.Idle(t, n) {
			out = append(out, n)
		}
	}
	return out
}

// Has says whether class was turned down by node at gen, its present
// generation.
func (j *Rejections) Has(node string, gen snapshot.Gen, class string) bool {
	_, ok := j.get(node, gen, class)
	return ok
}

// get is the verdict kept for class on node at gen, its present
// generation: the node's own, else one kept for a node of its key.
func (j *Rejections) get(node string, gen snapshot.Gen, class string) (NodeResult, bool) {
	if v, ok := j.no[rejection{node: node, gen: gen, class: class}]; ok {
		return v, true
	}
	if j.keyOf == nil {
		return NodeResult{}, false
	}
	key := j.keyOf(node)
	if key == "" {
		return NodeResult{}, false
	}
	v, ok := j.byKey[keyedRejection{key: key, class: class}]
	if !ok {
		return NodeResult{}, false
	}
	v.Node = node // another node's verdict, told as this one's
	return v, true
}

// put keeps v, class's verdict on node at gen, its present generation.
func (j *Rejections) put(node string, gen snapshot.Gen, class string, v NodeResult) {
	j.no[rejection{node: node, gen: gen, class: class}] = v
	if j.keyOf == nil {
		return
	}
	if key := j.keyOf(node); key != "" {
		j.byKey[keyedRejection{key: key, class: class}] = v
	}
}

// outcomeString is what a copy must match: the verdict and every
// member's node.
func outcomeString(o *PlacementOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", o.Code, o.Plugin)
	for _, m := range o.Members {
		switch {
		case m == nil:
			b.WriteString(" -")
		case m.Node == "":
			b.WriteString(" none")
		default:
			b.WriteString(" " + m.Node)
		}
	}
	return b.String()
}

// Rejections are the Filter verdicts "does not fit" of member classes on
// nodes at a generation (Alike.Class). One may serve every gang of a
// pass: a generation never names two states of a node.
type Rejections struct {
	no map[rejection]NodeResult
	// keyOf, when set, is a node's key in its present state ("" for a
	// node like no other: the estimator's NodeKeys), and byKey holds
	// every verdict by key too: nodes of one key turn a memoizable class
	// down alike (the nodeKeys rule, docs/design/caches.md), so the
	// verdict on one template instance a member filled holds for every
	// instance left in that state, in this gang's runs and later gangs'.
	keyOf func(node string) string
	byKey map[keyedRejection]NodeResult
}

type keyedRejection struct{ key, class string }

type rejection struct {
	node  string
	gen   snapshot.Gen
	class string
}

// NewRejections is an empty memo.
func NewRejections() *Rejections { return &Rejections{no: map[rejection]NodeResult{}} }

// NewKeyedRejections is an empty memo that also keeps verdicts by the
// nodes' keys, keyOf.
func NewKeyedRejections(keyOf func(node string) string) *Rejections {
	return &Rejections{no: map[rejection]NodeResult{}, keyOf: keyOf, byKey: map[keyedRejection]NodeResult{}}
}

// knownRejections is what a member's cycle may read and add to: its
// class's rejections.
type knownRejections struct {
	alike *Alike
	class string
	pod   string
}

// known is pod's view of the memo, nil when there is none or pod's
// verdicts are not its node's alone.
func (a *Alike) known(pod *v1.Pod) *knownRejections {
	if a == nil || a.Rejected == nil || a.Class == nil {
		return nil
	}
	class := a.Class(pod)
	if class == "" {
		return nil
	}
	return &knownRejections{alike: a, class: class, pod: pod.Namespace + "/" + pod.Name}
}

// has is whether the memo answers for a node at its generation (nil when
// it answers for none: no memo, or Verify, which filters every node).
func (k *knownRejections) has(r *Runner) func(node string) bool {
	if k == nil || k.alike.Verify {
		return nil
	}
	return func(node string) bool {
		return k.alike.Rejected.Has(node, r.snap.NodeGen(node), k.class)
	}
}

// Rejection is the memo's verdict "does not fit" on node for class at
// the node's present generation, if it holds one (Verify or not).
func (a *Alike) Rejection(r *Runner, class, node string) (NodeResult, bool) {
	if a == nil || a.Rejected == nil {
		return NodeResult{}, false
	}
	return a.Rejected.get(node, r.snap.NodeGen(node), class)
}

// filterKnown is filter over nodes that reads the nodes known to turn
// the class down from the memo instead of asking the plugins (k nil:
// plain filter), and remembers those the Filter plugins turn down. The
// verdicts come back in the order of nodes.
func (r *Runner) filterKnown(ctx context.Context, state *schedframework.CycleState, pod *v1.Pod, nodes []string, k *knownRejections) ([]NodeResult, error) {
	if k == nil {
		return r.filter(ctx, state, pod, nodes)
	}
	a := k.alike
	out := make([]NodeResult, len(nodes))
	gens := make([]snapshot.Gen, len(nodes))
	var ask []string
	var at []int
	for i, n := range nodes {
		gens[i] = r.snap.NodeGen(n)
		if v, ok := a.Rejected.get(n, gens[i], k.class); ok && !a.Verify {
			out[i] = v
			continue
		}
		ask, at = append(ask, n), append(at, i)
	}
	if len(ask) == 0 {
		return out, nil
	}
	byFilter := make([]bool, len(ask))
	got, err := r.filterNodes(ctx, state, pod, ask, byFilter)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = got[j]
		if v, ok := a.Rejected.get(nodes[i], gens[i], k.class); ok { // Verify
			if a.Checked != nil {
				a.Checked()
			}
			if (got[j].Fits || got[j].Code != v.Code || got[j].Plugin != v.Plugin) && a.Found != nil {
				a.Found(k.pod, nodes[i], verdict(v), verdict(got[j]))
			}
		}
		if byFilter[j] && !got[j].Fits && got[j].Code != fwk.Error {
			a.Rejected.put(nodes[i], gens[i], k.class, got[j])
		}
	}
	return out, nil
}

func verdict(n NodeResult) string {
	if n.Fits {
		return "fits"
	}
	return fmt.Sprintf("%s: %s", n.Plugin, n.Message)
}
