package fragmentation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/parallel"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// ProbeNamespace holds the probe pods and claims; they live only in forks
// of the snapshot and are always reverted.
const ProbeNamespace = "dra-autoscaler-probe"

// DefaultProbeBudget bounds the framework calls spent on branching while
// packing one node state (see leftover); past it the packing goes greedy.
const DefaultProbeBudget = 64

// maxMemo bounds each memo; past it the memo starts over.
const maxMemo = 1 << 16

// Analyzer answers, with the framework runner's scheduler, what a node's
// free device capacity can still serve. It memoises per node state (see
// state.key): nodes of one layout, equally allocated, are analysed once.
// Not safe for concurrent use (neither is the runner).
type Analyzer struct {
	runner *framework.Runner
	// ProbeBudget: see DefaultProbeBudget.
	ProbeBudget int

	sliceKeys map[*resourceapi.ResourceSlice]string
	trans     map[transKey]transition
	left      map[leftKey]Amounts
	// states caches measure per node and device state, across passes
	// (see measuredKey); byGen per node and generation within a pass,
	// which is all ranking's many reads of one node need to look up;
	// choices caches choice per node state and shape (see choiceKey).
	states  map[measuredKey]measured
	byGen   map[genKey]state
	choices map[choiceKey]choiceMemo
	// epoch is the snapshot's (snapshot.Epoch) when byGen and sliceKeys
	// were last used: no Gen outlives a Reset, and the slices of
	// hypothetical nodes are made anew by every build, so they are
	// dropped then rather than at maxMemo.
	epoch uint64
	seq   int
	// Calls counts framework calls made for probes, for tests and logs.
	Calls int
	// Shortcuts, with AnalyzerCache off, makes every answer afresh: the
	// memos are dropped at every call (nil: on).
	Shortcuts *shortcut.Set
}

// uncached drops the memos when the AnalyzerCache shortcut is off.
func (a *Analyzer) uncached() {
	if !a.Shortcuts.On(shortcut.AnalyzerCache) {
		a.Forget()
	}
}

type transKey struct{ state, shape string }

type transition struct {
	fits bool
	next string
}

type leftKey struct{ state, shapes string }

// measuredKey names a node's devices by the allocations that may hold
// them (snapshot.DeviceState's prints); measured holds the rest of what
// measure read, compared on every hit. Unlike a Gen it outlives the
// snapshot's Reset: an idle cluster's nodes are measured once, not once a
// pass.
type measuredKey struct {
	node         string
	alloc, other snapshot.AllocPrint
}

// genKey names a node at one generation (snapshot.Gen).
type genKey struct {
	node string
	gen  snapshot.Gen
}

// measured is a node's state and what it was read from besides the
// allocations: its slice objects and its Node (the profile's
// addedAffinity reads the node's labels). Holding them keeps their
// addresses from being reused by other objects while the memo lasts.
type measured struct {
	slices []*resourceapi.ResourceSlice
	node   *v1.Node
	st     state
}

// choiceKey is what a Choice depends on besides the node's name: the
// node's state (its key is the node's content up to names), the shape
// placed and the shapes stranded capacity is judged against. The probe
// the Choice came from would answer the same on any node of that state.
type choiceKey struct{ state, shape, shapes string }

type choiceMemo struct {
	c    Choice // Node unset
	fits bool
}

// NewAnalyzer returns an analyzer over runner's snapshot.
func NewAnalyzer(runner *framework.Runner) *Analyzer {
	a := &Analyzer{runner: runner, ProbeBudget: DefaultProbeBudget}
	a.Forget()
	return a
}

// Forget drops every memoised answer. Call it when device classes change:
// a class's selectors are part of every answer.
func (a *Analyzer) Forget() {
	a.sliceKeys = map[*resourceapi.ResourceSlice]string{}
	a.trans = map[transKey]transition{}
	a.left = map[leftKey]Amounts{}
	a.states = map[measuredKey]measured{}
	a.byGen = map[genKey]state{}
	a.choices = map[choiceKey]choiceMemo{}
}

func (a *Analyzer) snap() *snapshot.Snapshot { return a.runner.Snapshot() }

// NodeReport is one node's device capacity.
type NodeReport struct {
	Node string
	// Total is what the devices offer, Free what is not allocated,
	// Stranded the part of Free that no shape can use: what is left when
	// the node is packed with the shapes as well as the probes found.
	Total, Free, Stranded Amounts
}

// Node analyses one node for shapes. With no shapes, nothing can use the
// free capacity: all of it is stranded. The snapshot is left as it was.
func (a *Analyzer) Node(ctx context.Context, node string, shapes []*Shape) (NodeReport, error) {
	a.uncached()
	st, err := a.measure(node)
	if err != nil {
		return NodeReport{}, err
	}
	// The memos share their maps: the report gets copies.
	rep := NodeReport{Node: node, Total: maps.Clone(st.total), Free: maps.Clone(st.free)}
	if len(st.total) == 0 {
		rep.Stranded = Amounts{}
		return rep, nil
	}
	budget := a.ProbeBudget
	stranded, err := a.leftover(ctx, node, st, shapes, shapesKey(shapes), &budget)
	rep.Stranded = maps.Clone(stranded)
	return rep, err
}

// measure is the node's state, read again only when the node's devices,
// their allocations or its Node changed: ranking measures every feasible
// node for every pod, and only the node the last pod went to has changed;
// the stranded-capacity meter measures every node every pass.
func (a *Analyzer) measure(node string) (state, error) {
	snap := a.snap()
	a.turn(snap)
	gk := genKey{node, snap.NodeGen(node)}
	if st, ok := a.byGen[gk]; ok {
		return st, nil
	}
	st, err := a.measureState(node)
	if err != nil {
		return state{}, err
	}
	a.keepGen(gk, st)
	return st, nil
}

func (a *Analyzer) keepGen(gk genKey, st state) {
	if len(a.byGen) >= maxMemo {
		a.byGen = map[genKey]state{}
	}
	a.byGen[gk] = st
}

// measureState is measure by the node's DeviceState.
func (a *Analyzer) measureState(node string) (state, error) {
	k, m, hit, err := a.read(node, a.sliceKey)
	if err != nil || hit {
		return m.st, err
	}
	a.keep(k, m)
	return m.st, nil
}

// read is measureState without writing a memo (safe to run concurrently
// with itself and with snapshot reads): the node's key in states, what
// was measured, and whether states held it already.
func (a *Analyzer) read(node string, sliceKey func(*resourceapi.ResourceSlice, string) string) (measuredKey, measured, bool, error) {
	snap := a.snap()
	ds := snap.DeviceState(node)
	var obj *v1.Node
	if ni, err := snap.Get(node); err == nil {
		obj = ni.Node()
	}
	k := measuredKey{node, ds.Node, ds.Shared}
	if m, ok := a.states[k]; ok && m.node == obj && slices.Equal(m.slices, ds.Slices) {
		return k, m, true, nil
	}
	st, err := measure(snap, node, ds.Slices, sliceKey)
	if err != nil {
		return k, measured{}, false, err
	}
	if !a.admits(obj) {
		// The probes are the profile's pods too: on a node its
		// addedAffinity excludes none fits, whatever the devices. Such
		// a node's state is not the state of a node alike in devices
		// that admits them (the memos would give one the other's
		// answers).
		st.key += "|not admitted"
	}
	return k, measured{slices: ds.Slices, node: obj, st: st}, false, nil
}

func (a *Analyzer) keep(k measuredKey, m measured) {
	if len(a.states) >= maxMemo {
		a.states = map[measuredKey]measured{}
	}
	a.states[k] = m
}

// minParallelNodes is how many nodes MeasureAhead reads per goroutine at
// least.
const minParallelNodes = 256

// MeasureAhead measures, side by side, the nodes not measured at their
// current generation, for the next Node or Rank calls to find: the
// stranded-capacity meter asks about every node of the cluster in turn,
// and measuring one only reads the snapshot. Errors are left for Node to
// meet and report.
func (a *Analyzer) MeasureAhead(nodes []string) {
	if !a.Shortcuts.On(shortcut.AnalyzerCache) {
		return // every answer made afresh: nothing would be found
	}
	snap := a.snap()
	a.turn(snap)
	type ahead struct {
		gk  genKey
		k   measuredKey
		m   measured
		hit bool
		err error
	}
	var todo []ahead
	for _, n := range nodes {
		gk := genKey{n, snap.NodeGen(n)}
		if _, ok := a.byGen[gk]; !ok {
			todo = append(todo, ahead{gk: gk})
		}
	}
	// Slice keys not memoised are made, not kept, meanwhile.
	sliceKey := func(s *resourceapi.ResourceSlice, node string) string { return a.sliceKeyOf(s, node, false) }
	parallel.Each(len(todo), minParallelNodes, func(j int) {
		t := &todo[j]
		t.k, t.m, t.hit, t.err = a.read(t.gk.node, sliceKey)
	})
	for _, t := range todo {
		if t.err != nil {
			continue
		}
		if !t.hit {
			a.keep(t.k, t.m)
		}
		a.keepGen(t.gk, t.m.st)
	}
}

// turn drops the memos no Reset outlives when snap was reset since.
func (a *Analyzer) turn(snap *snapshot.Snapshot) {
	if e := snap.Epoch(); e != a.epoch {
		a.epoch = e
		a.byGen = map[genKey]state{}
		a.sliceKeys = map[*resourceapi.ResourceSlice]string{}
	}
}

// admits says whether the profile's addedAffinity, which the probes get
// as every pod does, admits node (true without one).
func (a *Analyzer) admits(node *v1.Node) bool {
	added := a.runner.Profile().AddedTo(nil).NodeAffinity
	if added == nil || added.RequiredDuringSchedulingIgnoredDuringExecution == nil || node == nil {
		return true
	}
	ok, err := nodeaffinity.NewLazyErrorNodeSelector(added.RequiredDuringSchedulingIgnoredDuringExecution).Match(node)
	return ok && err == nil
}

// sliceKey is the content key of s, one of node's slices. Most are the
// snapshot's digest of the slice, which it keeps for node keys anyway;
// pools named "<node>/<pool>" (hypothetical nodes' second pools) are
// hashed here without their name, which relativePool keys apart.
func (a *Analyzer) sliceKey(s *resourceapi.ResourceSlice, node string) string {
	return a.sliceKeyOf(s, node, true)
}

// sliceKeyOf is sliceKey, memoising what it makes only if keep (without,
// it is safe to run concurrently with itself).
func (a *Analyzer) sliceKeyOf(s *resourceapi.ResourceSlice, node string, keep bool) string {
	if !strings.HasPrefix(s.Spec.Pool.Name, node+"/") {
		if d, ok := a.snap().SliceDigest(s, node); ok {
			return string(d[:])
		}
	}
	if k, ok := a.sliceKeys[s]; ok {
		return k
	}
	if !keep {
		return sliceContentKey(s)
	}
	if len(a.sliceKeys) >= maxMemo {
		a.sliceKeys = map[*resourceapi.ResourceSlice]string{}
	}
	k := sliceContentKey(s)
	a.sliceKeys[s] = k
	return k
}

// leftover is the free capacity left on node, now in state st, once it
// is packed with shapes so as to leave the least (by Fraction): each
// shape that fits is placed by the framework in a fork and the packing
// goes on from there, depth first, memoised by state. Once budget
// branching calls are spent, each state takes only the first shape that
// fits (largest first), so the answer may then overstate what is stranded.
func (a *Analyzer) leftover(ctx context.Context, node string, st state, shapes []*Shape, shapesID string, budget *int) (Amounts, error) {
	lk := leftKey{st.key, shapesID}
	if v, ok := a.left[lk]; ok {
		return v, nil
	}
	best, bestScore, branched := st.free, Fraction(st.free, st.total), false
	for _, sh := range shapes {
		if branched && *budget <= 0 {
			break
		}
		if t, ok := a.trans[transKey{st.key, sh.Key}]; ok {
			if !t.fits {
				continue
			}
			if v, ok := a.left[leftKey{t.next, shapesID}]; ok {
				if s := Fraction(v, st.total); s < bestScore {
					best, bestScore = v, s
				}
				branched = true
				continue
			}
		}
		v, fits, err := a.branch(ctx, node, st, sh, shapes, shapesID, budget)
		if err != nil {
			return nil, err
		}
		if !fits {
			continue
		}
		branched = true
		if s := Fraction(v, st.total); s < bestScore {
			best, bestScore = v, s
		}
	}
	a.remember(lk, best)
	return best, nil
}

// branch places one probe of sh on node in a fork, packs on from the
// state it leads to and reverts.
func (a *Analyzer) branch(ctx context.Context, node string, st state, sh *Shape, shapes []*Shape, shapesID string, budget *int) (_ Amounts, fits bool, err error) {
	snap := a.snap()
	snap.Fork()
	defer func() {
		if rerr := snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("node %s: revert probe: %w", node, rerr)
		}
	}()
	*budget--
	placed, err := a.probe(ctx, sh, node)
	if err != nil {
		return nil, false, err
	}
	if !placed {
		a.trans[transKey{st.key, sh.Key}] = transition{}
		return nil, false, nil
	}
	next, err := a.measure(node)
	if err != nil {
		return nil, false, err
	}
	a.trans[transKey{st.key, sh.Key}] = transition{fits: true, next: next.key}
	v, err := a.leftover(ctx, node, next, shapes, shapesID, budget)
	return v, true, err
}

func (a *Analyzer) remember(k leftKey, v Amounts) {
	if len(a.left) >= maxMemo || len(a.trans) >= maxMemo {
		a.left, a.trans = map[leftKey]Amounts{}, map[transKey]transition{}
	}
	a.left[k] = v
}

// probe schedules, in the current fork, a pod holding claims of shape sh
// on node, through the framework with the slices scoped to the node. The
// probe tolerates every taint and asks for nothing else: only devices
// decide. It stays placed (the caller reverts).
func (a *Analyzer) probe(ctx context.Context, sh *Shape, node string) (bool, error) {
	pod, err := a.probePod(sh)
	if err != nil {
		return false, err
	}
	snap := a.snap()
	a.Calls++
	snap.ScopeSlices([]string{node})
	defer snap.ScopeSlices(nil)
	p, err := a.runner.SchedulePod(ctx, pod, []string{node})
	if err != nil {
		return false, fmt.Errorf("probe shape %s on node %s: %w", sh.Key, node, err)
	}
	return p.Node != "", nil
}

// probePod stores the claims of one probe and returns its pod.
func (a *Analyzer) probePod(sh *Shape) (*v1.Pod, error) {
	a.seq++
	name := "probe-" + strconv.Itoa(a.seq)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ProbeNamespace, Name: name, UID: types.UID("probe-" + strconv.Itoa(a.seq))},
		Spec: v1.PodSpec{
			Containers:  []v1.Container{{Name: "probe"}},
			Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
		},
	}
	for i := range sh.Claims {
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ProbeNamespace, Name: fmt.Sprintf("%s-%d", name, i),
				UID: types.UID(fmt.Sprintf("probe-%d-%d", a.seq, i))},
			Spec: sh.Claims[i],
		}
		if err := a.snap().SetResourceClaim(claim); err != nil {
			return nil, fmt.Errorf("probe claim: %w", err)
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims,
			v1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: ptr.To(claim.Name)})
	}
	return pod, nil
}
