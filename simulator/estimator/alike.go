package estimator

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// AlikePlacements says which placements of a gang's pod group cycle are
// alike (framework.Alike; the alikePlacements shortcut), nil when none
// may be taken for alike: the shortcut is off, or the gang's members or
// groups read more than their nodes.
//
// Two placements of a group are alike when, node by node in order, the
// nodes have the same NodeKeys key (what the filters read of a node, its
// pods and devices; labels no one reads, such as the topology values
// that tell the domains apart, left out) and fall into the same domains
// at every level below (values ranked by name, as the cycle orders
// them). The members then meet the same nodes in the same order, the
// same plugins give the same verdicts, and the scores are equal; what
// differs is names. That holds only for members whose verdict on a node
// depends on that node alone (NodeKeys.Keyable, no inter-pod affinity,
// no claim shared with another pod: the memoizable rule of memo.go, the
// gang itself aside) and for nodes holding none of the tree's own pods
// (the cycle's plugins count them where they are).
//
// keys are node keys whose pending pods include the tree's members (one
// NodeKeys may serve every gang of a pass: more pods read more labels,
// which only tells more nodes apart); nil: keys for the members alone.
func (e *Estimator) AlikePlacements(tree *framework.GroupTree, keys *NodeKeys) *framework.Alike {
	if e == nil || !e.on(shortcut.AlikePlacements) {
		return nil
	}
	members := tree.Pods()
	if keys == nil {
		var err error
		if keys, err = NewNodeKeys(e.runner.Snapshot(), e.runner.Profile(), members); err != nil || keys == nil {
			return nil
		}
	}
	groups := map[string]bool{}
	ns := ""
	for _, leaf := range tree.Leaves() {
		if leaf.PodGroup == nil || len(leaf.PodGroup.Spec.ResourceClaims) > 0 {
			return nil
		}
		groups[leaf.PodGroup.Name], ns = true, leaf.PodGroup.Namespace
	}
	for _, pod := range members {
		if !keys.Keyable(pod) || !privateClaims(pod) {
			return nil
		}
		if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
			return nil
		}
	}
	snap := e.runner.Snapshot()
	ours := func(node string) bool {
		ni, err := snap.NodeInfos().Get(node)
		if err != nil {
			return true
		}
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && p.Namespace == ns && groups[*sg.PodGroupName] {
				return true
			}
		}
		return false
	}
	check := e.opts.Check
	class := func(pod *v1.Pod) string {
		if !e.Memoizable(pod) {
			return ""
		}
		return e.ClassKey(pod)
	}
	rejected := keys.rejections()
	// idle: a node every member of leaf t was turned down by, at its
	// generation (the classes of t's members, "" when one has none).
	leafClasses := map[*framework.GroupTree][]string{}
	idle := func(t *framework.GroupTree, node string) bool {
		cs, ok := leafClasses[t]
		if !ok {
			for _, m := range t.Members {
				c := class(m)
				if c == "" {
					cs = nil
					break
				}
				if !slices.Contains(cs, c) {
					cs = append(cs, c)
				}
			}
			leafClasses[t] = cs
		}
		if len(cs) == 0 {
			return false
		}
		gen := snap.NodeGen(node)
		for _, c := range cs {
			if !rejected.Has(node, gen, c) {
				return false
			}
		}
		return true
	}
	alike := &framework.Alike{
		Key: func(t *framework.GroupTree, nodes []string) string {
			levels := t.TopologyKeys()
			ranks := make([]map[string]int, len(levels))
			for i, k := range levels {
				ranks[i] = domainRanks(snap, k, nodes)
			}
			var b strings.Builder
			var buf []byte
			for _, name := range nodes {
				if ours(name) {
					return ""
				}
				if t.Composite == nil && idle(t, name) {
					// Passed by: it turns every member down.
					continue
				}
				key := keys.Of(name)
				if key == "" {
					return ""
				}
				b.WriteString(key)
				ni, err := snap.NodeInfos().Get(name)
				if err != nil {
					return ""
				}
				buf = buf[:0]
				for i, k := range levels {
					r := -1
					if v, ok := ni.Node().Labels[k]; ok {
						r = ranks[i][v]
					}
					buf = binary.AppendVarint(buf, int64(r))
				}
				b.Write(buf)
			}
			return b.String()
		},
		Verify:  check != nil && check.Verify,
		Checked: func() { check.Checked("placement") },
		Found: func(group, placement, got, want string) {
			check.Found(shortcut.Mismatch{Shortcut: shortcut.AlikePlacements, Kind: "placement", Group: group, Node: placement, Got: got, Want: want})
		},
		// A member's class, when its verdict on a node is that node's
		// alone: members of groups that own no claims share classes
		// across gangs (inertGroup).
		Class:    class,
		Rejected: rejected,
		Idle:     idle,
	}
	return alike
}

// domainRanks numbers the values of key among nodes in name order.
func domainRanks(snap *snapshot.Snapshot, key string, nodes []string) map[string]int {
	values := map[string]bool{}
	for _, name := range nodes {
		if ni, err := snap.NodeInfos().Get(name); err == nil {
			if v, ok := ni.Node().Labels[key]; ok {
				values[v] = true
			}
		}
	}
	out := make(map[string]int, len(values))
	for i, v := range slices.Sorted(maps.Keys(values)) {
		out[v] = i
	}
	return out
}

// privateClaims: every claim of the pod is its own, made from a template.
func privateClaims(pod *v1.Pod) bool {
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName == nil {
			return false
		}
	}
	return true
}
