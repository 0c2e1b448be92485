package estimator

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// Groups whose templates are the same in everything the filters read get
// the same estimate: many groups differ only by a name label (one group
// per zone, per instance family or per team, selected by a pool label).
// The first such group is estimated, the others take its result under
// their own node names. "What the filters read" is taken conservatively:
// every field of the template except its name and the labels that no pod,
// no object in the snapshot and no argument of the scheduler profile (its
// addedAffinity) can select on.

// sharing says which template labels no filter reads this pass; nil means
// every group is estimated on its own.
type sharing struct {
	read map[string]bool
	// profile adds to every pod's scheduling (nil: nothing).
	profile *framework.ProfileArgs
}

// newSharing looks at the profile, the pods to place and the snapshot's
// pods with affinity terms, slices and claims for every node label key a
// filter may read. A profile whose addedAffinity reads node names turns
// sharing off (it reads them for every pod). Strict, a pod to place that
// reads node names or volumes turns it off too; else it is only recorded
// (and its caller must keep such pods out).
func newSharing(snap *snapshot.Snapshot, profile *framework.ProfileArgs, pods []*v1.Pod, strict bool, cluster *clusterReads) (*sharing, error) {
	s := &sharing{read: map[string]bool{}, profile: profile}
	if !s.addNodeAffinity(profile.AddedTo(nil).NodeAffinity) {
		return nil, nil
	}
	for _, p := range pods {
		if !s.addPod(p) && strict {
			return nil, nil
		}
	}
	// Of the pods placed, only their pod (anti-)affinity terms are read
	// when another pod is placed: the scheduler honours their required
	// anti-affinity and scores by their preferred terms. Their node
	// selectors and spread constraints were read when they were placed
	// themselves. The snapshot lists the nodes holding such pods, so that
	// the planner's every round does not walk every running pod.
	infos, err := snap.NodeInfos().HavePodsWithAffinityList()
	if err != nil {
		return nil, err
	}
	for _, ni := range infos {
		for _, pi := range ni.GetPodsWithAffinity() {
			s.addPod(pi.GetPod())
		}
	}
	if cluster == nil {
		cluster = &clusterReads{}
	}
	keys, ok, err := cluster.of(snap)
	if err != nil || !ok {
		return nil, err
	}
	for _, k := range keys {
		s.read[k] = true
	}
	return s, nil
}

// clusterReads are the label keys the cluster's slices and allocated
// claims select nodes by, kept while the snapshot's shared generation
// holds: those change it (a slice or an allocation bound to one node
// selects by name, not label, and touches only that node), and a planner
// asking once per gang would otherwise walk every claim each time.
type clusterReads struct {
	snap   *snapshot.Snapshot
	shared uint64
	keys   []string
	ok     bool
}

// of returns the keys; ok is false when a slice reaches nodes by label
// (any label may count then).
func (c *clusterReads) of(snap *snapshot.Snapshot) ([]string, bool, error) {
	gen := snap.NodeGen("").Shared
	if c.snap == snap && c.shared == gen {
		return c.keys, c.ok, nil
	}
	slices, err := snap.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, false, err
	}
	*c = clusterReads{snap: snap, shared: gen}
	for _, sl := range slices {
		if sl.Spec.NodeSelector != nil || (sl.Spec.PerDeviceNodeSelection != nil && *sl.Spec.PerDeviceNodeSelection) {
			// Devices reachable from nodes by label: any label may count.
			return nil, false, nil
		}
	}
	claims, err := snap.ResourceClaims().List()
	if err != nil {
		return nil, false, err
	}
	read := &sharing{read: map[string]bool{}}
	for _, cl := range claims {
		if a := cl.Status.Allocation; a != nil && a.NodeSelector != nil {
			read.addSelector(a.NodeSelector)
		}
	}
	c.keys = make([]string, 0, len(read.read))
	for k := range read.read {
		c.keys = append(c.keys, k)
	}
	c.ok = true
	return c.keys, true, nil
}

// addPod records the label keys pod's scheduling reads, the profile's
// additions included. ok is false when it reads node names or volumes
// (whose topology may name any label): for a pod to place, nothing is
// then shared. Every key is recorded either way.
func (s *sharing) addPod(p *v1.Pod) (ok bool) {
	ok = true
	for k := range p.Spec.NodeSelector {
		s.read[k] = true
		// The hostname label is the node's name by another road.
		ok = ok && k != v1.LabelHostname
	}
	for _, c := range spreadOf(p, s.profile) {
		s.read[c.TopologyKey] = true
	}
	ok = s.addNodeAffinity(s.profile.AddedTo(p).NodeAffinity) && ok
	if a := p.Spec.Affinity; a != nil {
		ok = s.addNodeAffinity(a.NodeAffinity) && ok
		if pa := a.PodAffinity; pa != nil {
			s.addPodTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			s.addPodTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	for _, vol := range p.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil {
			ok = false
		}
	}
	return ok
}

// readsNodeNames reports whether pod's placement, under profile, may
// read a node's name (a field selector, the hostname label) or volumes.
func readsNodeNames(pod *v1.Pod, profile *framework.ProfileArgs) bool {
	s := &sharing{read: map[string]bool{}, profile: profile}
	return !s.addPod(pod)
}

func (s *sharing) addPodTerms(required []v1.PodAffinityTerm, preferred []v1.WeightedPodAffinityTerm) {
	for _, t := range required {
		s.read[t.TopologyKey] = true
	}
	for _, t := range preferred {
		s.read[t.PodAffinityTerm.TopologyKey] = true
	}
}

// addNodeAffinity records the keys of a node affinity's required and
// preferred terms; false when one reads node names.
func (s *sharing) addNodeAffinity(na *v1.NodeAffinity) bool {
	if na == nil {
		return true
	}
	ok := true
	if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		ok = s.addSelector(na.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		ok = s.addTerm(t.Preference) && ok
	}
	return ok
}

// addSelector records a node selector's keys; false when it selects by
// field or by the hostname label (a node's name), which differs between
// any two groups' nodes.
func (s *sharing) addSelector(sel *v1.NodeSelector) bool {
	ok := true
	for _, t := range sel.NodeSelectorTerms {
		ok = s.addTerm(t) && ok
	}
	return ok
}

func (s *sharing) addTerm(t v1.NodeSelectorTerm) bool {
	ok := len(t.MatchFields) == 0
	for _, e := range t.MatchExpressions {
		s.read[e.Key] = true
		ok = ok && e.Key != v1.LabelHostname
	}
	return ok
}

// reads tells whether a label key may matter: a key something selects on,
// or a well-known one (zone, region, instance type, ...), which volumes and
// controllers read without a pod saying so.
func (s *sharing) reads(key string) bool {
	if s.read[key] {
		return true
	}
	prefix, _, qualified := strings.Cut(key, "/")
	return !qualified || prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") ||
		prefix == "k8s.io" || strings.HasSuffix(prefix, ".k8s.io")
}

// readLabels is labels without the hostname and the keys no filter reads.
func (s *sharing) readLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k != v1.LabelHostname && s.reads(k) {
			out[k] = v
		}
	}
	return out
}

// key is the group's template and cap as the filters see them; groups
// with equal keys get equal estimates. "" when s is nil.
func (s *sharing) key(g TemplateGroup, maxNodes int, cache *classCache) (string, error) {
	if s == nil {
		return "", nil
	}
	t := g.Template
	labels := s.readLabels(t.Node.Labels)
	// Templates are not changed in place within a pass (snapshot epoch):
	// a template read the same way keeps its key for the pass.
	var reads strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&reads, "%q=%q,", k, labels[k])
	}
	ck := templateReads{t: t, reads: reads.String()}
	if base, ok := cache.templates[ck]; ok {
		return fmt.Sprintf("%s/%d", base, maxNodes), nil
	}
	node := t.Node.DeepCopy()
	node.ObjectMeta = metav1.ObjectMeta{Labels: labels, Annotations: node.Annotations}
	type shape struct {
		Node   *v1.Node
		Slices []any
		Pods   []any
		CSI    any
	}
	sh := shape{Node: node}
	for _, sl := range t.ResourceSlices {
		spec := sl.Spec.DeepCopy()
		spec.NodeName = nil
		if spec.Pool.Name == t.Node.Name {
			spec.Pool.Name = ""
		}
		sh.Slices = append(sh.Slices, spec)
	}
	for _, p := range t.Pods {
		spec := p.Spec.DeepCopy()
		spec.NodeName = ""
		sh.Pods = append(sh.Pods, struct {
			Labels, Annotations map[string]string
			Spec                *v1.PodSpec
		}{p.Labels, p.Annotations, spec})
	}
	if t.CSINode != nil {
		sh.CSI = t.CSINode.Spec
	}
	b, err := json.Marshal(sh)
	if err != nil {
		return "", fmt.Errorf("template of group %s: %w", g.Name, err)
	}
	base := fmt.Sprintf("%x", sha256.Sum256(b))
	cache.templates[ck] = base
	return fmt.Sprintf("%s/%d", base, maxNodes), nil
}

// templateReads is a template as pods that read labels reads it.
type templateReads struct {
	t     *cloudprovider.NodeTemplate
	reads string
}

// renamed is from's estimate for group to: the same pods on the same
// number of nodes, named as to's own estimate would name them. A run
// names its nodes "<group>-template-<i>" with i counting up and skipping
// the names the snapshot holds (nodes kept earlier in the pass): the
// node from's run named with its r-th free name is to's r-th free name.
// ok is false when a name is not from's.
func renamed(res *Estimate, from, to string, snap *snapshot.Snapshot) (*Estimate, bool) {
	prefix := from + "-template-"
	index := map[string]int{}
	last := -1
	for _, list := range [][]string{res.NewNodes, res.droppedNodes} {
		for _, n := range list {
			rest, ok := strings.CutPrefix(n, prefix)
			i, err := strconv.Atoi(rest)
			if !ok || err != nil || i < 0 {
				return nil, false
			}
			index[n], last = i, max(last, i)
		}
	}
	// rank[i]: how many free names of from come before index i.
	rank := make([]int, last+1)
	free := 0
	for i := range rank {
		rank[i] = free
		if !snap.HasNode(prefix + strconv.Itoa(i)) {
			free++
		}
	}
	var toNames []string
	for next := 0; len(toNames) < free; next++ {
		if name := fmt.Sprintf("%s-template-%d", to, next); !snap.HasNode(name) {
			toNames = append(toNames, name)
		}
	}
	names := make(map[string]string, len(index))
	for n, i := range index {
		names[n] = toNames[rank[i]]
	}
	rename := func(n string) (string, bool) {
		name, ok := names[n]
		return name, ok
	}
	out := *res
	out.NewNodes = make([]string, len(res.NewNodes))
	for i, n := range res.NewNodes {
		out.NewNodes[i], _ = rename(n)
	}
	out.Placements = make([]Placement, len(res.Placements))
	for i, p := range res.Placements {
		name, ok := names[p.Node]
		if !ok {
			return nil, false
		}
		out.Placements[i] = Placement{Pod: p.Pod, Node: name}
	}
	// The unplaced pods' verdicts name no node (droppedNodes does): the
	// entries are shared, not copied per pod for every alike group.
	out.Unplaced = res.Unplaced.shared()
	out.droppedNodes = make([]string, len(res.droppedNodes))
	for i, n := range res.droppedNodes {
		name, ok := rename(n)
		if !ok {
			return nil, false
		}
		out.droppedNodes[i] = name
	}
	out.FrameworkCalls, out.MemoHits, out.group = 0, 0, to
	// The memo speaks of the other template's nodes and pools.
	out.seed = nil
	return &out, true
}
