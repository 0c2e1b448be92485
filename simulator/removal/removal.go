// Package removal answers "can these nodes go?" with the real scheduler
// framework: in a fork of the snapshot, a candidate node is removed, the
// claims that only its moving pods hold are released, and each pod is
// placed again on the remaining nodes by the framework, its claims
// allocated anew there by the DRA plugin. Removals tried in one pass
// stack: pods moved off one node take room the next node's pods cannot
// count on, and a node that received pods is not removed in the same pass.
package removal

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Candidate is a node to try and the pods that must find another node
// (those that die with it, DaemonSet and mirror pods, are not listed).
type Candidate struct {
	Node string
	Pods []*corev1.Pod
}

// CandidateVerdict is the verdict on one candidate.
type CandidateVerdict struct {
	Node      string
	Removable bool
	// Moves maps each moving pod ("namespace/name") to its new node.
	Moves map[string]string
	// Reason says why the node cannot go, when it cannot.
	Reason string
}

// Session is one series of removals tried against one snapshot. It holds a
// fork open from Begin to End; nothing it does outlives End.
type Session struct {
	runner *framework.Runner
	// order holds the nodes pods may move to, in order of preference
	// (order.nodes); the first order.staying of them stay for the pass.
	order    order
	removed  map[string]bool
	received map[string]bool
	closed   bool
	// memo, when set, keeps the Filter verdicts "does not fit" of
	// memoizable classes for the pass (the removalMemo shortcut).
	memo *framework.Alike
	// passed counts, per memoizable class, the leading destinations that
	// are gone or that the memo says turn the class down at their
	// present generation: a pod of the class is placed from there on,
	// without a lookup per node it passes (the nodes that stay come
	// first, and once full every later pod walked past them). gone is
	// by destination; gens lists the nodes whose generation
	// changed, whose verdicts a count may no longer stand for.
	passed map[string]int
	saved  map[string]int // passed as a try found it (TryAll)
	gone   []bool
	gens   snapshot.GenLog
	// copies, when set, copy a placement the framework made for a
	// memoizable, keyable class to a destination of the same key (the
	// removalCopy shortcut); fits holds those placements by class and
	// key.
	copies *Copies
	fits   map[keyClass]keptFit
	// keyable says, by class, whether its pods are keyable: a class's
	// pods share every field Keyable reads (as fit-existing asks it once
	// per class).
	keyable map[string]bool
	// view is the pod being placed as its replacement would look
	// (unbound), for the class and a copied placement, which keep
	// nothing of it: one copy per session rather than one per moved pod.
	// What the framework places is a copy of its own (unbound).
	view corev1.Pod
}

// Begin opens a pass. Pods may move to the nodes of stay (nodes that are
// not removed in this pass) and of maybe (nodes that may be), each in
// order of preference; the framework takes the first that fits, stay's
// before maybe's, so that moved pods fill the nodes that stay anyway
// rather than spend more nodes as destinations.
func Begin(runner *framework.Runner, stay, maybe []string) *Session {
	runner.Snapshot().Fork()
	p := &Session{runner: runner, order: newOrder(stay, maybe), removed: map[string]bool{}, received: map[string]bool{}}
	p.gone = make([]bool, len(p.order.nodes))
	return p
}

// Stays says that node, one of maybe, is not removed in this pass (a
// budget or a gang keeps it, or it could not go): pods now go to it after
// the nodes known to stay before it and before every node that may still
// go. A node moved there already, or not a destination, is left alone.
func (p *Session) Stays(node string) {
	i, ok := p.order.at(node)
	if !ok || i < p.order.staying {
		return
	}
	gone := p.gone[i]
	at := p.order.stay(i)
	copy(p.gone[at+1:i+1], p.gone[at:i])
	p.gone[at] = gone
	// Counts past at now span a node they did not judge unless it was
	// among those they spanned already.
	for c, k := range p.passed {
		if k > at && i >= k {
			p.passed[c] = at
		}
	}
}

// UseMemo lets the pass keep the Filter verdicts "does not fit" of the
// classes a.Class names, in a.Rejected (the removalMemo shortcut): pods
// moved off later candidates pass the nodes earlier moves filled without
// filtering them again. The session keeps the memo true: a removal that
// frees what nodes other than its own may offer (devices not local to the
// removed nodes, pods with required anti-affinity, which turn pods away
// from a whole domain) starts it anew, since a verdict it holds may no
// longer be the framework's while the judged node's generation is.
func (p *Session) UseMemo(a *framework.Alike) {
	p.memo = a
	p.passed = map[string]int{}
	p.runner.Snapshot().LogGens(&p.gens)
}

// End drops every change of the pass.
func (p *Session) End() error {
	if p.closed {
		return nil
	}
	p.closed = true
	p.view = corev1.Pod{}
	p.runner.Snapshot().LogGens(nil)
	return p.runner.Snapshot().Revert()
}

// Removed are the nodes removed so far in this pass, sorted.
func (p *Session) Removed() []string {
	out := make([]string, 0, len(p.removed))
	for n := range p.removed {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Try removes the candidate node if all its pods find room elsewhere; the
// removal then stays in effect for the rest of the pass. Otherwise the
// snapshot is left as it was and the result says why. An error is a
// broken snapshot, not a node that cannot go.
func (p *Session) Try(ctx context.Context, c Candidate) (CandidateVerdict, error) {
	return p.TryAll(ctx, []Candidate{c})
}

// TryAll is Try for nodes that go together or not at all (the nodes of a
// gang that moves whole): all are removed before any pod is placed, so no
// pod moves to a node of the same unit. CandidateVerdict.Node is the first node.
func (p *Session) TryAll(ctx context.Context, cs []Candidate) (res CandidateVerdict, err error) {
	if len(cs) == 0 {
		return res, fmt.Errorf("no node to remove")
	}
	res = CandidateVerdict{Node: cs[0].Node}
	if p.closed {
		return res, fmt.Errorf("removal pass already ended")
	}
	snap := p.runner.Snapshot()
	unit := map[string]bool{}
	var pods []*corev1.Pod
	for _, c := range cs {
		switch {
		case p.removed[c.Node]:
			return res, fmt.Errorf("node %s already removed in this pass", c.Node)
		case !snap.HasNode(c.Node):
			return res, fmt.Errorf("node %s not in the snapshot", c.Node)
		case p.received[c.Node]:
			res.Reason = fmt.Sprintf("node %s received pods of a node removed in this pass", c.Node)
			return res, nil
		}
		unit[c.Node] = true
		pods = append(pods, c.Pods...)
	}
	snap.Fork()
	keep := false
	memoAnew, shuns := false, false
	if p.passed != nil {
		// The counts as they were, for a revert: copied into the map the
		// last revert left (a clone per candidate was a map each).
		if p.saved == nil {
			p.saved = map[string]int{}
		}
		clear(p.saved)
		maps.Copy(p.saved, p.passed)
	}
	p.markGone(unit, true)
	defer func() {
		end := snap.Revert
		switch {
		case keep:
			end = snap.Commit
		case shuns:
			// A pod placed with required anti-affinity turned pods away
			// from its domain; reverted, it is gone, and verdicts made
			// while it stood may not hold for nodes whose Gen did not
			// move.
			p.anew()
			p.markGone(unit, false)
		case memoAnew:
			// The verdicts the counts stood for are gone, and fits found
			// while the node was away may not hold with it back.
			clear(p.passed)
			clear(p.fits)
			p.markGone(unit, false)
		default:
			// The revert gives back the generations the counts were
			// made at.
			if p.passed != nil {
				p.passed, p.saved = p.saved, p.passed
			}
			p.markGone(unit, false)
		}
		if eerr := end(); eerr != nil && err == nil {
			err = fmt.Errorf("close fork of node %s: %w", res.Node, eerr)
		}
	}()
	moving := map[types.UID]bool{}
	for _, pod := range pods {
		moving[pod.UID] = true
	}
	widens := p.memo != nil && p.antiAffinityLeaves(unit)
	for _, pod := range pods {
		freed, err := p.release(pod, moving, unit)
		if err != nil {
			return res, fmt.Errorf("node %s: %w", pod.Spec.NodeName, err)
		}
		widens = widens || freed
	}
	if widens && p.memo != nil {
		p.anew()
		memoAnew = true
	}
	infos := p.podInfos(cs)
	for _, c := range cs {
		if err := snap.RemoveNode(c.Node); err != nil {
			return res, err
		}
	}
	res.Moves = map[string]string{}
	var targets []string
	if len(pods) > 0 && p.memo == nil {
		// With the memo, placeKnown walks the destinations itself.
		targets = make([]string, 0, len(p.order.nodes))
		for _, d := range p.order.nodes {
			if !unit[d] && !p.removed[d] {
				targets = append(targets, d)
			}
		}
	}
	for _, pod := range pods {
		placement, err := p.place(ctx, pod, infos[pod.UID], targets)
		p.forget()
		if err != nil {
			return res, fmt.Errorf("node %s: re-place pod %s/%s: %w", pod.Spec.NodeName, pod.Namespace, pod.Name, err)
		}
		if placement.Node == "" {
			res.Moves = nil
			res.Reason = fmt.Sprintf("pod %s/%s fits no other node%s", pod.Namespace, pod.Name, summary(placement.Results))
			klog.FromContext(ctx).V(4).Info("Node cannot be removed", "node", pod.Spec.NodeName, "reason", res.Reason)
			return res, nil
		}
		res.Moves[pod.Namespace+"/"+pod.Name] = placement.Node
		if shunsOthers(pod) {
			// Nodes of its domain may turn pods down that a kept fit
			// says they take.
			shuns = true
			clear(p.fits)
		}
	}
	keep = true
	res.Removable = true
	for n := range unit {
		p.removed[n] = true
	}
	for _, to := range res.Moves {
		p.received[to] = true
	}
	return res, nil
}

// window is how many destinations one scheduling cycle filters.
const window = 64

// place puts pod, moved off its node, on the first destination, in
// order, that takes it.
// Destinations are filtered a window at a time, with the snapshot's slices
// scoped to the window: a pod that fits early costs one small cycle, not
// a Filter and a DRA allocator over the whole cluster. The answer is the
// one a single cycle over all destinations gives (the first that fits),
// for the reason the estimator's scoped cycles give theirs: a node's
// allocations read only its own slices and those bound to no node.
func (p *Session) place(ctx context.Context, moved *corev1.Pod, info fwk.PodInfo, targets []string) (*framework.ScheduleResult, error) {
	snap := p.runner.Snapshot()
	defer snap.ScopeSlices(nil)
	if p.memo != nil {
		return p.placeKnown(ctx, moved, info)
	}
	pod := unbound(moved)
	all := &framework.ScheduleResult{}
	for start := 0; start < len(targets); start += window {
		w := targets[start:min(start+window, len(targets))]
		snap.ScopeSlices(w)
		pl, err := p.runner.SchedulePod(ctx, pod, w)
		if err != nil {
			return nil, err
		}
		if pl.Node != "" {
			return pl, nil
		}
		all.Results = append(all.Results, pl.Results...)
	}
	return all, nil
}

// placeKnown is place with the memo: a pod of a memoizable class starts
// past the destinations its class's count spans (verify mode checks the
// count and starts from the first). info, if not nil, is the PodInfo of
// the pod as it was on its node: a copied placement reuses what it
// computed of the pod.
func (p *Session) placeKnown(ctx context.Context, moved *corev1.Pod, info fwk.PodInfo) (*framework.ScheduleResult, error) {
	p.view = *moved
	p.view.Spec.NodeName, p.view.Status.NominatedNodeName = "", ""
	pod := &p.view
	class := ""
	if p.memo.Class != nil {
		class = p.memo.Class(pod)
	}
	if class == "" {
		return p.placeFrom(ctx, unbound(moved), class, 0)
	}
	p.forget()
	start := p.advance(class)
	c := p.copyAt(pod, class, start)
	if p.memo.Verify {
		p.check(pod, class, start)
		start = 0
	} else if c.kept != nil {
		copied, err := p.copies.Copier.CopyPlacement(pod, info, c.kept.p, c.node)
		if err != nil || copied {
			if copied {
				// Its key is the one the copied placement left.
				p.copies.Keys.Known(c.node, c.kept.after)
			}
			return &framework.ScheduleResult{Node: c.node}, err
		}
	}
	pod = unbound(moved)
	pl, err := p.placeFrom(ctx, pod, class, start)
	if err != nil {
		return nil, err
	}
	if c.kept != nil { // verify mode: the copy it would have made
		p.compare(pod, c, pl)
	}
	if c.node != "" && pl.Node == c.node {
		if np, ok := p.copies.Copier.CapturePlacement(pl.Pod, pl.Node); ok {
			p.fits[c.kc] = keptFit{p: np, shared: c.shared, after: p.copies.Keys.Of(pl.Node)}
		}
	}
	return pl, nil
}

// placeFrom places pod, of class, on the first live destination from
// start that takes it, through the framework (the memo's rejections
// read).
func (p *Session) placeFrom(ctx context.Context, pod *corev1.Pod, class string, start int) (*framework.ScheduleResult, error) {
	// A window of live destinations at a time: most pods fit one of the
	// first, and listing all for each pod cost more than placing it.
	res := &framework.ScheduleResult{}
	live := make([]string, 0, window)
	for i := start; i < len(p.order.nodes); {
		live = live[:0]
		for ; i < len(p.order.nodes) && len(live) < window; i++ {
			if !p.gone[i] {
				live = append(live, p.order.nodes[i])
			}
		}
		pl, err := p.runner.SchedulePodFirstFitKnown(ctx, pod, live, p.memo)
		if err != nil || pl.Node != "" {
			return pl, err
		}
		res.Results = append(res.Results, pl.Results...)
	}
	if start == 0 {
		return res, nil
	}
	// Unplaced: the nodes passed count in the reasons too.
	var known []framework.NodeResult
	for i := range start {
		if v, ok := p.memo.Rejection(p.runner, class, p.order.nodes[i]); ok && !p.gone[i] {
			known = append(known, v)
		}
	}
	res.Results = append(known, res.Results...)
	return res, nil
}

// advance moves class's count past the destinations the memo answers
// for and returns it.
func (p *Session) advance(class string) int {
	k := p.passed[class]
	for k < len(p.order.nodes) {
		if !p.gone[k] {
			if _, ok := p.memo.Rejection(p.runner, class, p.order.nodes[k]); !ok {
				break
			}
		}
		k++
	}
	p.passed[class] = k
	return k
}

// forget takes back every count past a destination whose generation
// changed since (all of them when the shared part's did).
func (p *Session) forget() {
	for _, n := range p.gens.Take() {
		if n == "" {
			clear(p.passed)
			continue
		}
		i, ok := p.order.at(n)
		if !ok {
			continue
		}
		for c, k := range p.passed {
			if k > i {
				p.passed[c] = i
			}
		}
	}
}

// check is verify mode's look at class's count: every destination it
// spans must be gone or known to turn the class down now.
func (p *Session) check(pod *corev1.Pod, class string, count int) {
	for i := range count {
		if p.gone[i] {
			continue
		}
		if p.memo.Checked != nil {
			p.memo.Checked()
		}
		if _, ok := p.memo.Rejection(p.runner, class, p.order.nodes[i]); !ok && p.memo.Found != nil {
			p.memo.Found(pod.Namespace+"/"+pod.Name, p.order.nodes[i], "passed by the removal's count", "not known to reject")
		}
	}
}

// shunsOthers reports a pod with required anti-affinity: placed, it may
// turn pods away from every node of its topology domain.
func shunsOthers(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// markGone marks unit's nodes as destinations no pod may go to (to), or
// back.
func (p *Session) markGone(unit map[string]bool, to bool) {
	for n := range unit {
		if i, ok := p.order.at(n); ok {
			p.gone[i] = to
		}
	}
}

// release prepares a moving pod's claims for a new allocation: the pod
// leaves reservedFor, and a claim no pod outside the moving set holds
// loses its allocation, as the resourceclaim controller deallocates a
// claim nobody uses. A claim shared with a pod that stays keeps its
// allocation, so the moving pod can only go where that allocation is
// reachable: exactly the scheduler's rule. freed says whether an
// allocation it dropped held devices other nodes than unit's may use.
func (p *Session) release(pod *corev1.Pod, moving map[types.UID]bool, unit map[string]bool) (freed bool, err error) {
	snap := p.runner.Snapshot()
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue // not created yet, or not needed: nothing to release
		}
		claim, ok := snap.ResourceClaim(pod.Namespace, *name)
		if !ok {
			continue // the DRA plugin reports a missing claim on re-placing
		}
		var rest []resourceapi.ResourceClaimConsumerReference
		stays := false
		for _, ref := range claim.Status.ReservedFor {
			if ref.UID == pod.UID {
				continue
			}
			rest = append(rest, ref)
			if !moving[ref.UID] {
				stays = true
			}
		}
		c := *claim
		c.Status.ReservedFor = rest
		if !stays {
			if a := c.Status.Allocation; a != nil && !localTo(a.NodeSelector, unit) {
				freed = true
			}
			c.Status.Allocation = nil
			c.Status.ReservedFor = nil
		}
		if err := snap.SetResourceClaim(&c); err != nil {
			return freed, fmt.Errorf("release claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return freed, nil
}

// localTo reports an allocation's node selector as the scheduler writes
// it for devices of one node, that node in unit.
func localTo(sel *corev1.NodeSelector, unit map[string]bool) bool {
	return unit[snapshot.PinnedNode(sel)]
}

// antiAffinityLeaves reports a pod with required anti-affinity among the
// pods on unit's nodes: with it gone, pods it kept from its whole
// topology domain may fit nodes whose generation did not move.
func (p *Session) antiAffinityLeaves(unit map[string]bool) bool {
	for n := range unit {
		ni, err := p.runner.Snapshot().NodeInfos().Get(n)
		if err != nil || len(ni.GetPodsWithRequiredAntiAffinity()) > 0 {
			return true
		}
	}
	return false
}

// unbound is the pod as its controller's replacement would look to the
// scheduler: same spec and claims, no node.
func unbound(pod *corev1.Pod) *corev1.Pod {
	cp := *pod
	cp.Spec.NodeName = ""
	cp.Status.NominatedNodeName = ""
	return &cp
}

// summary condenses per-node rejections to the most common reasons.
func summary(results []framework.NodeResult) string {
	counts := map[string]int{}
	for _, r := range results {
		if !r.Fits {
			counts[r.Plugin+": "+r.Message]++
		}
	}
	if len(counts) == 0 {
		return ""
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	if len(reasons) > 2 {
		reasons = reasons[:2]
	}
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%d× %s", counts[r], r)
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
