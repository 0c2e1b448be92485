package plan

import (
	"slices"
	"strings"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// gangReplay is what the two forked runs of a gang's cycle decided (the
// domain, the instances its members took, what each domain was found to
// lack), kept for the next gang of its kind (estimator.GangKind). A
// burst of alike gangs (a job's hundred replicas) would otherwise run
// the cycle over the same instances again and again, the gangs planned
// before them changing only nodes those runs are never offered: their
// own instances, kept, are not candidates. Part of the alikePlacements
// shortcut: replayed only while the runs' input is the same, and in
// verify mode the runs are made and their decision compared instead
// (checkReplay).
type gangReplay struct {
	// candidates are the existing nodes the runs were offered (narrowed),
	// gens their generations and shared the snapshot's shared one then.
	candidates []string
	gens       []snapshot.Gen
	shared     snapshot.Gen
	// all are the instances the first forked run was offered.
	all []instanceSet
	// keep and chosen are what the gang's kept cycle was offered: the
	// chosen placement's candidates and instances.
	keep   []string
	chosen []instanceSet
	domain string
	tried  []DomainTry
	// groups name the gang's groups, in the tree's order: a replay's
	// tries name the replaying gang's instead (triesFor).
	groups []string
}

// triesFor are r's tries told of tree's groups: a child's try names its
// group, which is the replaying gang's own.
func (r *gangReplay) triesFor(tree *framework.GroupTree) []DomainTry {
	groups := groupNames(tree, nil)
	if len(groups) != len(r.groups) {
		return r.tried // not of a kind after all; names as they were
	}
	out := slices.Clone(r.tried)
	for i := range out {
		for j, g := range r.groups {
			if rest, ok := strings.CutPrefix(out[i].Message, g); ok && (rest == "" || strings.HasPrefix(rest, ":")) {
				out[i].Message = groups[j] + rest
				break
			}
		}
	}
	return out
}

// groupNames lists tree's groups, parents before their children.
func groupNames(t *framework.GroupTree, out []string) []string {
	out = append(out, t.String())
	for _, c := range t.Children {
		out = groupNames(c, out)
	}
	return out
}

// replayFor is the replay a gang of kind may take, offered candidates
// and instances all: nil unless a gang of its kind was offered the same
// instances and the same candidates, none of which changed since.
func (st gangStage) replayFor(runner *framework.Runner, kind string, candidates []string, all []instanceSet) *gangReplay {
	r, ok := st.replays[kind]
	if !ok || kind == "" || !slices.Equal(r.candidates, candidates) || !slices.Equal(r.all, all) {
		return nil
	}
	snap := runner.Snapshot()
	if snap.NodeGen("") != r.shared {
		return nil
	}
	for i, n := range candidates {
		if snap.NodeGen(n) != r.gens[i] {
			return nil
		}
	}
	return r
}

// inputOf is a replay's input as the runs meet it now: candidates and
// their generations; the caller adds the rest once the runs decided.
func inputOf(runner *framework.Runner, candidates []string) *gangReplay {
	snap := runner.Snapshot()
	r := &gangReplay{candidates: candidates, gens: make([]snapshot.Gen, len(candidates)), shared: snap.NodeGen("")}
	for i, n := range candidates {
		r.gens[i] = snap.NodeGen(n)
	}
	return r
}

// sameDecision says whether the runs decided as r did.
func (r *gangReplay) sameDecision(domain string, keep []string, chosen []instanceSet) bool {
	return r.domain == domain && slices.Equal(r.keep, keep) && slices.Equal(r.chosen, chosen)
}

// checkReplay tells alike (verify mode) when the runs made for a gang
// that could have replayed r decided otherwise.
func checkReplay(alike *framework.Alike, tree *framework.GroupTree, r *gangReplay, domain string, keep []string, chosen []instanceSet) {
	if r == nil || alike == nil || !alike.Verify {
		return
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	if !r.sameDecision(domain, keep, chosen) && alike.Found != nil {
		alike.Found(tree.String(), domain, "replayed domain "+r.domain+" from an alike gang",
			"the cycle's runs choose domain "+domain+" (or other nodes or instances)")
	}
}
