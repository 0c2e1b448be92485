package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
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
	// opts are the gang's options, nil when they may not be reused.
	opts *replayOptions
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

// sameInput is the replay a gang of kind may take, offered candidates:
// nil unless a gang of its kind was offered the same candidates, none of
// which changed since. It is taken when the instances offered are the
// same too (gangReplay.all).
func (st gangStage) sameInput(runner *framework.Runner, kind string, candidates []string) *gangReplay {
	r, ok := st.replays[kind]
	if !ok || kind == "" || !slices.Equal(r.candidates, candidates) {
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

// replayOptions are what a replay keeps of its gang's options, so that
// the next gang of its kind need not estimate the groups again: the
// estimates of the same classes on the same templates, with the same
// room, in the same shared state, are the same but for which pod of a
// class goes where, and options read only how many of each.
type replayOptions struct {
	options []expander.Option
	// classes are the options' pods' classes (estimator.ClassKey).
	classes map[*corev1.Pod]string
	// gates are every group's gate, room capped at the gang's size.
	gates []gateSig
}

// gateSig is a group's gate as an estimate for n pods meets it: whether
// it may grow, and its room up to n (an estimate for n pods opens at
// most n nodes, so more room is the same to it), or why not; reserved
// when reservations cap it (which pods they serve depends on the pods).
type gateSig struct {
	room     int
	reason   string
	reserved bool
}

// gateSigs are every group's gates for pods.
func (p *Planner) gateSigs(groups []*nodegroups.Info, usage limits.Usage, now time.Time, pods []*corev1.Pod) []gateSig {
	out := make([]gateSig, len(groups))
	for i, g := range groups {
		c, reason, _ := p.gate(g, usage, now)
		if c == nil {
			out[i] = gateSig{reason: reason}
			continue
		}
		out[i] = gateSig{room: min(c.room, len(pods))}
		if p.capacity != nil {
			if room, _, _, _ := p.capacity.Room(g, pods); room >= 0 {
				out[i].reserved = true
			}
		}
	}
	return out
}

// keepOptions keeps the options of the gang whose pods are pods, with
// the gates they met, for the replays of its kind.
func (p *Planner) keepOptions(r *gangReplay, options []expander.Option, pods []*corev1.Pod, gates []gateSig) {
	if options == nil {
		return
	}
	ro := &replayOptions{options: options, classes: map[*corev1.Pod]string{}, gates: gates}
	for _, pod := range pods {
		c := p.estimate.ClassKey(pod)
		if c == "" {
			return
		}
		ro.classes[pod] = c
	}
	r.opts = ro
}

// optionsFor are r's options told of pods (the next gang of r's kind),
// when its groups meet the same gates and no reservation caps one: in
// each option, each pod of the old gang is replaced by a pod of pods of
// its class, in order (each option is an estimate of its own over all
// the pods), and the option is priced and described for them anew (what
// lands on reservations depends on the pods and on what was booked
// since). nil when they may differ.
func (p *Planner) optionsFor(r *gangReplay, pods []*corev1.Pod, groups []*nodegroups.Info, gates []gateSig, now time.Time) []expander.Option {
	if r == nil || r.opts == nil || !slices.Equal(r.opts.gates, gates) || slices.ContainsFunc(gates, func(g gateSig) bool { return g.reserved }) {
		return nil
	}
	byClass := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		c := p.estimate.ClassKey(pod)
		if c == "" {
			return nil
		}
		byClass[c] = append(byClass[c], pod)
	}
	out := make([]expander.Option, len(r.opts.options))
	for i, old := range r.opts.options {
		g := groupByID(groups, old.NodeGroup)
		if g == nil {
			return nil
		}
		next := map[string]int{}
		mapped := make([]*corev1.Pod, len(old.Pods))
		for j, pod := range old.Pods {
			c := r.opts.classes[pod]
			if next[c] >= len(byClass[c]) {
				return nil
			}
			mapped[j] = byClass[c][next[c]]
			next[c]++
		}
		out[i] = p.option(g, old.NodeCount, mapped, now)
		out[i].DevicesUsed = old.DevicesUsed
	}
	return out
}

// checkOptions tells alike (verify mode) when options reused from an
// alike gang (again, nil when none could be) differ from the options
// estimated for the gang: in group, nodes, pods, devices, price or
// capacity.
func checkOptions(alike *framework.Alike, tree *framework.GroupTree, again, options []expander.Option) {
	if again == nil || alike == nil || !alike.Verify {
		return
	}
	if alike.Checked != nil {
		alike.Checked()
	}
	sig := func(opts []expander.Option) string {
		var b strings.Builder
		for _, o := range opts {
			fmt.Fprintf(&b, "%s +%d pods=%d devices=%d price=%g %s/%d; ", o.NodeGroup, o.NodeCount, len(o.Pods), o.DevicesUsed, o.Price,
				o.CapacityType, o.ReservedNodes)
		}
		return b.String()
	}
	if got, want := sig(again), sig(options); got != want && alike.Found != nil {
		alike.Found(tree.String(), "", "options of an alike gang: "+got, "options estimated: "+want)
	}
}
