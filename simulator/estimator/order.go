package estimator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/internal/parallel"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// ordering is the pods of one estimate in first-fit-decreasing order, each
// with its class.
type ordering struct {
	pods []*v1.Pod
	// infos are the pods' scheduler PodInfos, same index.
	infos   []*schedframework.PodInfo
	classOf []*class
	classes []*class
}

// classCache remembers the class key of each pod between estimates: the
// planner estimates the same pending pods for every node group, and
// hashing a pod's shape costs more than a whole memoized placement. An
// entry is reused only while the snapshot objects the key was computed
// from are the same objects (the snapshot replaces, never modifies, what
// it stores) and the pod is the same object.
//
// Entries are of the snapshot's epoch (snapshot.Epoch: a pass) or the
// one before (prev): a pod still pending in the next pass is keyed once,
// a pod gone for a whole pass leaves. ClassKey and kept estimates add
// entries, and a pass need not estimate at all (every pod fits).
type classCache struct {
	entries, prev map[*v1.Pod]cacheEntry
	epoch         uint64
	// templates are the sharing keys of templates (sharing.key), for the
	// epoch.
	templates map[templateReads]string
	// cluster are the label keys slices and claims select by (sharing).
	cluster clusterReads
	// podInfo, when set, is where pods' PodInfos come from (UsePodInfos).
	podInfo func(*v1.Pod) fwk.PodInfo
	// profile is what the scheduler profile adds to pods (nil: nothing),
	// for the memoizable rule.
	profile *framework.ProfileArgs
}

type cacheEntry struct {
	refs       []claimRef
	key        string
	memoizable bool
	devices    int64
	// inert: the key was made with the pod's group inert (inertGroup).
	inert bool
	// info is the pod's PodInfo, made once and handed to every placement
	// of the pod (framework SchedulePodInfo, snapshot AddPodCopy), so
	// that its resources are not computed again for each node group.
	info *schedframework.PodInfo
}

func newClassCache() *classCache {
	return &classCache{entries: map[*v1.Pod]cacheEntry{}, templates: map[templateReads]string{}}
}

// turn starts a new generation of entries when the snapshot was Reset
// since the cache was last used: what the last one did not use goes.
func (cc *classCache) turn(snap *snapshot.Snapshot) {
	if e := snap.Epoch(); e != cc.epoch {
		cc.prev, cc.entries, cc.epoch = cc.entries, map[*v1.Pod]cacheEntry{}, e
		cc.templates = map[templateReads]string{}
	}
}

// lookup returns pod's entry, from this generation or the last.
func (cc *classCache) lookup(pod *v1.Pod) (cacheEntry, bool) {
	if entry, ok := cc.entries[pod]; ok {
		return entry, true
	}
	entry, ok := cc.prev[pod]
	return entry, ok
}

// classify groups pods into classes and sorts them: accelerator demand
// first, then CPU, then memory, all decreasing; ties by class (in order of
// the classes' first pods by namespace/name), then namespace/name. Keeping
// a class's pods together keeps its nodes uniform, which is what lets the
// memo reuse placements. With evict, entries for pods not seen in this
// call are dropped from the cache; without, they stay (EstimateAndKeep
// classifies the chosen pods, a subset of those the planner estimates
// next, which would otherwise all be keyed again each round).
func (cc *classCache) classify(snap *snapshot.Snapshot, pods []*v1.Pod, evict bool) (*ordering, error) {
	sorted := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if p == nil {
			return nil, fmt.Errorf("nil pod")
		}
		if p.UID == "" {
			return nil, fmt.Errorf("pod %s/%s has no UID", p.Namespace, p.Name)
		}
		sorted = append(sorted, p)
	}
	slices.SortFunc(sorted, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	cc.turn(snap)
	shared := sharedClaims(sorted)
	next := make(map[*v1.Pod]cacheEntry, len(sorted))
	byKey := map[string]*class{}
	o := &ordering{pods: sorted, classOf: make([]*class, len(sorted))}
	// Each pod's entry reads the snapshot and the cache only: made side
	// by side (the planner classifies the pods left every round), then
	// taken in order, so the first error in order is the one returned.
	entries := make([]cacheEntry, len(sorted))
	errs := make([]error, len(sorted))
	parallel.Each(len(sorted), classifyAtLeast, func(i int) {
		entries[i], errs[i] = cc.entryOf(snap, sorted[i], shared)
	})
	for i, p := range sorted {
		if errs[i] != nil {
			return nil, errs[i]
		}
		entry := entries[i]
		inert := entry.inert
		if entry.info == nil {
			entry.info = cc.newPodInfo(p)
		}
		next[p] = entry
		c := byKey[entry.key]
		if c == nil {
			c = &class{id: len(o.classes), key: entry.key, memoizable: entry.memoizable, antiAffinity: usesRequiredAntiAffinity(p),
				fitsLater: mayFitLater(p, cc.profile, inert)}
			c.demand(p, entry.devices)
			byKey[entry.key] = c
			o.classes = append(o.classes, c)
		}
		o.classOf[i] = c
	}
	if evict {
		cc.entries, cc.prev = next, nil
	} else {
		maps.Copy(cc.entries, next)
	}
	idx := make([]int, len(sorted))
	for i := range idx {
		idx[i] = i
	}
	// The input is already in namespace/name order and class ids follow
	// it, so a stable sort on (demand, class) keeps that as the last tie-break.
	slices.SortStableFunc(idx, func(a, b int) int {
		ca, cb := o.classOf[a], o.classOf[b]
		return cmp.Or(cmp.Compare(cb.accel, ca.accel), cmp.Compare(cb.cpu, ca.cpu),
			cmp.Compare(cb.mem, ca.mem), cmp.Compare(ca.id, cb.id))
	})
	out := &ordering{pods: make([]*v1.Pod, len(idx)), infos: make([]*schedframework.PodInfo, len(idx)),
		classOf: make([]*class, len(idx)), classes: o.classes}
	for i, k := range idx {
		out.pods[i], out.infos[i], out.classOf[i] = sorted[k], next[sorted[k]].info, o.classOf[k]
	}
	return out, nil
}

// classifyAtLeast is how many pods classify gives each goroutine at
// least (tests set it past their pods to compare with one at a time).
var classifyAtLeast = 256

// entryOf is pod's entry as of snap: the cached one while its claims and
// group are as they were, else keyed anew (the PodInfo carried over).
func (cc *classCache) entryOf(snap *snapshot.Snapshot, p *v1.Pod, shared map[string]bool) (cacheEntry, error) {
	refs, err := resolve(snap, p, shared)
	if err != nil {
		return cacheEntry{}, err
	}
	inert := inertGroup(snap, p)
	entry, ok := cc.lookup(p)
	if ok && slices.Equal(entry.refs, refs) && entry.inert == inert {
		return entry, nil
	}
	key, memoizable, devices, err := keyOf(p, refs, cc.profile, inert)
	if err != nil {
		return cacheEntry{}, err
	}
	return cacheEntry{refs: refs, key: key, memoizable: memoizable, devices: devices, info: entry.info, inert: inert}, nil
}

// newPodInfo returns the scheduler's PodInfo of pod with its resources
// computed now: the PodInfo caches them on first use, and computing them
// here, once, keeps that write out of whatever later reads it.
func (cc *classCache) newPodInfo(pod *v1.Pod) *schedframework.PodInfo {
	if cc.podInfo != nil {
		if info, ok := cc.podInfo(pod).(*schedframework.PodInfo); ok && info != nil {
			return info
		}
	}
	return newPodInfo(pod)
}

func newPodInfo(pod *v1.Pod) *schedframework.PodInfo {
	// The error is about affinity terms the API server accepted but the
	// scheduler cannot parse; the scheduler's own cache ignores it too
	// (NodeInfo.AddPod), and the Filter plugins report such pods.
	info, _ := schedframework.NewPodInfo(pod)
	info.CalculateResource()
	return info
}

// ClassKey returns the equivalence class of pod as the estimator sees it
// (controller plus scheduling-relevant spec, claims by content), for
// callers that also skip pods of a class once one of them fits nowhere.
// It returns "" for pods that must always be tried on their own, because
// placing other pods can make them fit (required pod affinity, topology
// spread that is not best-effort, gang members), and for pods it cannot
// classify.
func (e *Estimator) ClassKey(pod *v1.Pod) string {
	entry, ok := e.entryNow(pod)
	if !ok {
		return ""
	}
	e.cache.entries[pod] = entry // Memoizable reads it there
	return entry.key
}

// entryNow is classEntry of pod at the snapshot's present epoch.
func (e *Estimator) entryNow(pod *v1.Pod) (cacheEntry, bool) {
	if pod == nil || e == nil || e.runner == nil {
		return cacheEntry{}, false
	}
	snap := e.runner.Snapshot()
	e.cache.turn(snap)
	return e.classEntry(snap, pod)
}

// ClassifyAll keys pods for ClassKey and Memoizable ahead, side by side:
// a pod's key reads the snapshot and the cache only, and the first pass
// after a start keys every pending pod (20,000 at L4) before it can fit
// any. The cache is written afterwards, on the caller's goroutine.
func (e *Estimator) ClassifyAll(pods []*v1.Pod) {
	if e == nil || e.runner == nil {
		return
	}
	snap := e.runner.Snapshot()
	e.cache.turn(snap)
	entries := make([]cacheEntry, len(pods))
	keyed := make([]bool, len(pods))
	parallel.Each(len(pods), 256, func(i int) {
		if pods[i] != nil {
			entries[i], keyed[i] = e.classEntry(snap, pods[i])
		}
	})
	for i, ok := range keyed {
		if ok {
			e.cache.entries[pods[i]] = entries[i]
		}
	}
}

// classEntry is what ClassKey keeps of pod, ok false for a pod with no
// class (tried on its own). It writes nothing: ClassifyAll runs it side
// by side.
func (e *Estimator) classEntry(snap *snapshot.Snapshot, pod *v1.Pod) (cacheEntry, bool) {
	if mayFitLater(pod, e.runner.Profile(), inertGroup(snap, pod)) {
		return cacheEntry{}, false
	}
	entry, err := e.cache.entryOf(snap, pod, nil)
	return entry, err == nil
}

// ClassOf is ClassKey and Memoizable at once, for a pod made for one
// question (scale-down's copy of a pod it moves off a node): nothing is
// kept of it, as an entry kept by that copy would never be looked up
// again.
func (e *Estimator) ClassOf(pod *v1.Pod) (key string, memoizable bool) {
	entry, ok := e.entryNow(pod)
	if !ok {
		return "", false
	}
	return entry.key, entry.memoizable
}

// Memoizable reports whether a pod's class is memoizable (see memo.go):
// its verdict on a node depends only on that node, so a fit found there
// holds as long as the node is unchanged. False when ClassKey is "".
func (e *Estimator) Memoizable(pod *v1.Pod) bool {
	if e.ClassKey(pod) == "" {
		return false
	}
	return e.cache.entries[pod].memoizable
}

// mayFitLater reports pods whose verdict can turn from "no" to "yes" as
// other pods are placed; a hard spread constraint the profile adds is one
// of the pod's own to the filter. A gang member counts, unless its group
// is inert (inertGroup).
func mayFitLater(pod *v1.Pod, profile *framework.ProfileArgs, inert bool) bool {
	if pod.Spec.SchedulingGroup != nil && !inert {
		return true
	}
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return true
	}
	return slices.ContainsFunc(spreadOf(pod, profile), func(c v1.TopologySpreadConstraint) bool {
		return c.WhenUnsatisfiable != v1.ScheduleAnyway
	})
}

// reset clears what a previous estimate learnt about the classes.
func (o *ordering) reset() {
	for _, c := range o.classes {
		c.unplaceable, c.open, c.seen, c.closed = nil, c.open[:0], 0, c.closed[:0]
	}
}

// sharedClaims returns the "ns/name" of existing claims that more than one
// of the pods names.
func sharedClaims(pods []*v1.Pod) map[string]bool {
	seen := map[string]bool{}
	var shared map[string]bool
	for _, p := range pods {
		for i := range p.Spec.ResourceClaims {
			if framework.ClaimNotMadeYet(p, &p.Spec.ResourceClaims[i]) {
				continue // no name yet, and the error saying so costs
			}
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			key := p.Namespace + "/" + *name
			if seen[key] {
				if shared == nil {
					shared = map[string]bool{}
				}
				shared[key] = true
			}
			seen[key] = true
		}
	}
	return shared
}
