package plan

import (
	"slices"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A gang's first run is offered only the candidates with its root's
// topology label, found once per stage; the shortcut off, in verify mode
// or for a root without a key, every candidate. In verify mode a root
// placement holding an unlabelled node is reported.
func TestGangStageLabelled(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const block = "example.com/block"
	candidates := []string{"plain-0", "b0-0", "plain-1", "b1-0"}
	for _, name := range candidates {
		n := builder.Node(name).CPU("8")
		if name[0] == 'b' {
			n = n.Label(block, name[:2])
		}
		if err := runner.Snapshot().AddNode(n.Obj()); err != nil {
			t.Fatal(err)
		}
	}
	withKey := &framework.GroupTree{PodGroup: builder.PodGroup("ns", "train").MinCount(1).TopologyKey(block).Obj()}
	noKey := &framework.GroupTree{PodGroup: builder.PodGroup("ns", "train").MinCount(1).Obj()}
	tests := []struct {
		name  string
		tree  *framework.GroupTree
		alike *framework.Alike
		want  []string
	}{
		{"root topology key", withKey, &framework.Alike{}, []string{"b0-0", "b1-0"}},
		{"shortcut off", withKey, nil, candidates},
		{"verify mode", withKey, &framework.Alike{Verify: true}, candidates},
		{"root without a key", noKey, &framework.Alike{}, candidates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newGangStage(nil)
			for range 2 { // the second from the stage's memo
				if got := st.labelled(runner, tc.tree, candidates, tc.alike); !slices.Equal(got, tc.want) {
					t.Errorf("labelled = %v, want %v", got, tc.want)
				}
			}
		})
	}

	t.Run("verify finds an unlabelled node in a placement", func(t *testing.T) {
		for _, nodes := range [][]string{{"b0-0"}, {"b0-0", "plain-1"}} {
			var found []string
			checked := 0
			alike := &framework.Alike{Verify: true, Checked: func() { checked++ },
				Found: func(group, placement, got, want string) { found = append(found, got) }}
			res := &framework.PodGroupResult{Group: withKey.String(), Placements: []framework.PlacementOutcome{{Name: "b0", Nodes: nodes}}}
			checkLabelled(runner, alike, withKey, res)
			if wantFound := slices.Contains(nodes, "plain-1"); len(found) > 0 != wantFound || checked != 1 {
				t.Errorf("placement of %v: found %v, %d checks; want a mismatch %v, one check", nodes, found, checked, wantFound)
			}
		}
	})
}

// Verify mode reports a replay whose gang's runs decided otherwise: the
// domain, the chosen placement's candidates or its instances.
func TestCheckReplay(t *testing.T) {
	sets := []instanceSet{{count: 2}}
	r := &gangReplay{domain: "b1", keep: []string{"n1"}, chosen: sets}
	tree := &framework.GroupTree{PodGroup: builder.PodGroup("ns", "train").Obj()}
	for _, tc := range []struct {
		name   string
		domain string
		keep   []string
		chosen []instanceSet
		found  bool
	}{
		{"the same decision", "b1", []string{"n1"}, sets, false},
		{"another domain", "b2", []string{"n1"}, sets, true},
		{"other candidates", "b1", nil, sets, true},
		{"other instances", "b1", []string{"n1"}, []instanceSet{{count: 3}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, checks := false, 0
			alike := &framework.Alike{Verify: true, Checked: func() { checks++ }, Found: func(_, _, _, _ string) { found = true }}
			checkReplay(alike, tree, r, tc.domain, tc.keep, tc.chosen)
			if found != tc.found || checks != 1 {
				t.Errorf("found %v after %d checks, want %v after 1", found, checks, tc.found)
			}
		})
	}
}
