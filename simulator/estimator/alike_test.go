package estimator

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const (
	alikeRack  = "example.com/rack"
	alikeBlock = "example.com/block"
)

func TestAlikePlacements(t *testing.T) {
	rackNode := func(name, block, rack string) *corev1.Node {
		return builder.Node(name).CPU("4").Label(alikeBlock, block).Label(alikeRack, rack).Obj()
	}
	member := func(name string) *builder.PodBuilder {
		return builder.Pod("ns", name).CPU("1").PodGroup("train")
	}
	affinity := member("m-0").Obj()
	affinity.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: alikeRack, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}}}
	tests := []struct {
		name    string
		members []*corev1.Pod
		group   *builder.PodGroupBuilder
		// extra is loaded besides four nodes: r1 {a, b} and r2 {c, d}
		// in block b1, r3 {e, f} in block b2.
		extra []any
		// alike are the placements compared: nil means no Alike at all.
		alike map[[2]string]bool
		off   bool
	}{{
		name:    "fresh racks of one template",
		members: []*corev1.Pod{member("m-0").Obj(), member("m-1").Obj()},
		alike:   map[[2]string]bool{{"a,b", "c,d"}: true, {"a,b", "e,f"}: true, {"a,b,c,d", "e,f"}: false},
	}, {
		name:    "a rack holding a member of the gang",
		members: []*corev1.Pod{member("m-0").Obj()},
		extra:   []any{member("m-1").Node("c").Obj()},
		alike:   map[[2]string]bool{{"a,b", "c,d"}: false, {"a,b", "e,f"}: true},
	}, {
		name:    "a rack holding a stranger alike in what it takes",
		members: []*corev1.Pod{member("m-0").Obj()},
		extra:   []any{builder.Pod("ns", "other").CPU("1").Node("c").Obj(), builder.Pod("ns", "other-2").CPU("1").Node("e").Obj()},
		alike:   map[[2]string]bool{{"a,b", "c,d"}: false, {"c,d", "e,f"}: true},
	}, {
		// Domains are tried by name, nodes in order: positions must agree.
		name:    "domains below split or ordered differently",
		members: []*corev1.Pod{member("m-0").Obj()},
		alike:   map[[2]string]bool{{"a,b,c,d", "a,c,b,d"}: false, {"a,b,c,d", "c,d,a,b"}: false, {"a,b,c,d", "b,a,d,c"}: true},
	}, {
		name:    "inter-pod affinity",
		members: []*corev1.Pod{affinity},
	}, {
		name:    "a claim of the group",
		members: []*corev1.Pod{member("m-0").ClaimFromTemplate("link", "link").Obj()},
		group:   builder.PodGroup("ns", "train").MinCount(1).TopologyKey(alikeRack).ClaimFromTemplate("link", "link"),
	}, {
		name:    "a claim shared by name",
		members: []*corev1.Pod{member("m-0").Claim("gpu", "shared").Obj()},
	}, {
		name:    "shortcut off",
		members: []*corev1.Pod{member("m-0").Obj()},
		off:     true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRunner(t)
			s := r.Snapshot()
			if tc.group == nil {
				tc.group = builder.PodGroup("ns", "train").MinCount(int32(len(tc.members))).TopologyKey(alikeRack)
			}
			group := tc.group.Obj()
			snapshottest.Load(t, s, rackNode("a", "b1", "r1"), rackNode("b", "b1", "r1"), rackNode("c", "b1", "r2"),
				rackNode("d", "b1", "r2"), rackNode("e", "b2", "r3"), rackNode("f", "b2", "r3"), group)
			snapshottest.Load(t, s, tc.extra...)
			for _, m := range tc.members {
				snapshottest.Load(t, s, m)
			}
			opts := Options{}
			if tc.off {
				opts.Shortcuts = shortcut.Without(shortcut.AlikePlacements)
			}
			tree := &framework.GroupTree{PodGroup: group, Members: tc.members}
			alike := New(r, opts).AlikePlacements(tree, nil)
			if (alike == nil) != (tc.alike == nil) {
				t.Fatalf("Alike %v, want one: %v", alike, tc.alike != nil)
			}
			for pair, want := range tc.alike {
				k1, k2 := alike.Key(tree, strings.Split(pair[0], ",")), alike.Key(tree, strings.Split(pair[1], ","))
				if got := k1 != "" && k1 == k2; got != want {
					t.Errorf("%s alike to %s: %v, want %v", pair[0], pair[1], got, want)
				}
			}
		})
	}
}
