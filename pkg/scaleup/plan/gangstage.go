package plan

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// gangStage is what a gang stage's gangs share: node keys (nil: each
// gang makes its own, or none), the template instances the cycle's runs
// add, made once (template.Instances), and the candidates carrying each
// root topology key's label.
type gangStage struct {
	keys      *estimator.NodeKeys
	instances *template.Instances
	byLabel   map[string][]string
	// replays are the last decisions of each kind of gang (gangReplay).
	replays map[string]*gangReplay
}

func newGangStage(keys *estimator.NodeKeys) gangStage {
	return gangStage{keys: keys, instances: template.NewInstances(), byLabel: map[string][]string{}, replays: map[string]*gangReplay{}}
}

// labelled are the candidates a gang's first run is offered: those with
// the label of the root's topology key, found once for the stage (the
// candidates are the same for every gang of it). The placement generator
// groups nodes by that label's value, so a node without it is in no
// placement, and the cycle over the others is the cycle over all (every
// gang of a large cluster would otherwise have the generator read
// thousands of nodes that are in no domain). Part of the alikePlacements
// shortcut, as narrowed: without it, for a root without a topology key
// (its one placement holds every node), or another generator, all
// candidates; in verify mode too, and checkLabelled checks the rule.
func (st gangStage) labelled(runner *framework.Runner, tree *framework.GroupTree, candidates []string, alike *framework.Alike) []string {
	key := tree.RootTopologyKey()
	if alike == nil || alike.Verify || key == "" || st.byLabel == nil || !runner.PlacementsPerNode() {
		return candidates
	}
	if out, ok := st.byLabel[key]; ok {
		return out
	}
	var out []string
	for _, name := range candidates {
		if hasLabel(runner, name, key) {
			out = append(out, name)
		}
	}
	st.byLabel[key] = out
	return out
}

func hasLabel(runner *framework.Runner, node, key string) bool {
	ni, err := runner.Snapshot().Get(node)
	if err != nil {
		return true // offered: the cycle says what it makes of it
	}
	_, ok := ni.Node().Labels[key]
	return ok
}

// checkLabelled tells alike (verify mode) when a root placement of res
// holds a node without the root's topology label, which labelled would
// not have offered.
func checkLabelled(runner *framework.Runner, alike *framework.Alike, tree *framework.GroupTree, res *framework.PodGroupResult) {
	key := tree.RootTopologyKey()
	if alike == nil || !alike.Verify || key == "" || !runner.PlacementsPerNode() {
		return
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	for _, pl := range res.Placements {
		for _, n := range pl.Nodes {
			if !hasLabel(runner, n, key) && alike.Found != nil {
				alike.Found(res.Group, pl.Name, "placement holds node "+n+" without label "+key,
					"no placement of the root holds a node without its topology label (the first run was offered only the labelled nodes)")
				return
			}
		}
	}
}

// gangNodeKeys are node keys for every gang's members: one for the
// stage, as the alike placements of each gang ask for them (nil: each
// gang makes its own, or none).
func (p *Planner) gangNodeKeys(runner *framework.Runner, gangs []*gang.Gang) *estimator.NodeKeys {
	if len(gangs) < 2 {
		return nil
	}
	var pods []*corev1.Pod
	for _, g := range gangs {
		pods = append(pods, g.Pending...)
	}
	keys, err := estimator.NewNodeKeys(runner.Snapshot(), runner.Profile(), pods)
	if err != nil {
		return nil
	}
	return keys
}
