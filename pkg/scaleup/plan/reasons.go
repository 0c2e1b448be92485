package plan

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// reasonLog records, for one round of planning, why groups cannot help
// pods: each entry stands for a set of pods, and a pod's own reasons are
// made only for the pods asked about (those no group helps in the end).
// With thousands of pending pods and a hundred groups, making every pod's
// reasons every round cost more than the estimates.
type reasonLog struct {
	entries []reasonEntry
}

// reasonEntry is one group's reason for a set of pods: pods (minus skip)
// with a fixed reason, or the pods an estimate left unplaced.
type reasonEntry struct {
	group  string
	pods   []*corev1.Pod
	skip   map[types.UID]bool
	reason GroupReason
	// cand and unplaced: an estimate's unplaced pods on cand's group.
	cand     *candidate
	unplaced estimator.UnplacedPods
}

// all gives every pod of pods reason r.
func (l *reasonLog) all(pods []*corev1.Pod, r GroupReason) {
	l.entries = append(l.entries, reasonEntry{group: r.Group, pods: pods, reason: r})
}

// except gives reason r to the pods not in keep.
func (l *reasonLog) except(pods []*corev1.Pod, keep map[types.UID]bool, r GroupReason) {
	l.entries = append(l.entries, reasonEntry{group: r.Group, pods: pods, skip: keep, reason: r})
}

// left records the pods an estimate of c's group could not place.
func (l *reasonLog) left(c candidate, unplaced estimator.UnplacedPods) {
	if unplaced.Len() > 0 {
		l.entries = append(l.entries, reasonEntry{group: c.info.Id, cand: &c, unplaced: unplaced})
	}
}

// supersede drops the entries of the groups newer logs for: a group's
// latest round says why it cannot help (so only the latest round's pods
// stay referenced, not every round's).
func supersede(rounds []*reasonLog, newer *reasonLog) {
	fresh := map[string]bool{}
	for _, e := range newer.entries {
		fresh[e.group] = true
	}
	for _, l := range rounds {
		kept := l.entries[:0]
		for _, e := range l.entries {
			if !fresh[e.group] {
				kept = append(kept, e)
			}
		}
		clear(l.entries[len(kept):])
		l.entries = kept
	}
}

// reasons makes the reasons of the pods in want, entry by entry in the
// order they were logged, skipping groups in done.
func (p *Planner) reasons(ctx context.Context, l *reasonLog, want map[types.UID]bool, done map[types.UID]map[string]bool,
	out map[types.UID][]GroupReason) {
	add := func(uid types.UID, r GroupReason) {
		if !done[uid][r.Group] {
			out[uid] = append(out[uid], r)
		}
	}
	for _, e := range l.entries {
		if e.cand == nil {
			for _, pod := range e.pods {
				if want[pod.UID] && !e.skip[pod.UID] {
					add(pod.UID, e.reason)
				}
			}
			continue
		}
		for u := range e.unplaced.All() {
			if want[u.Pod.UID] {
				add(u.Pod.UID, p.unplacedReason(ctx, e.cand, u))
			}
		}
	}
}

// resolve turns the rounds' logs into the reasons of pods: the latest
// round's reason for a group stands; a group not estimated in a later
// round (it was chosen, or gated the same way) keeps its earlier reason.
func (p *Planner) resolve(ctx context.Context, rounds []*reasonLog, pods []*corev1.Pod) map[types.UID][]GroupReason {
	want := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		want[pod.UID] = true
	}
	out := map[types.UID][]GroupReason{}
	done := map[types.UID]map[string]bool{}
	for i := len(rounds) - 1; i >= 0; i-- {
		round := map[types.UID][]GroupReason{}
		p.reasons(ctx, rounds[i], want, done, round)
		for uid, rs := range round {
			if done[uid] == nil {
				done[uid] = map[string]bool{}
			}
			for _, r := range rs {
				done[uid][r.Group] = true
			}
			out[uid] = append(out[uid], rs...)
		}
	}
	return out
}

// unplacedReason is why c's group could not place the pod u.
func (p *Planner) unplacedReason(ctx context.Context, c *candidate, u estimator.Unplaced) GroupReason {
	gr := GroupReason{Group: c.info.Id, Reason: u.Result.Plugin, Message: u.Result.Message}
	switch {
	case u.Limit == estimator.LimitMaxNodes:
		gr = GroupReason{Group: c.info.Id, Reason: c.reason, Message: fmt.Sprintf("room for %d more node(s)", c.room)}
	case u.Limit != "":
		gr = GroupReason{Group: c.info.Id, Reason: ReasonEstimateLimit, Message: u.Limit}
	case framework.VolumePlugins[u.Result.Plugin] && p.diagnose != nil:
		if why := p.diagnose.Volumes(u.Pod, c.info.Template); why != "" {
			gr.Message += ": " + why
		}
	case u.Result.Plugin == framework.DynamicResources:
		gr.Constraint = p.blame(ctx, u.Pod, c.info)
		if len(c.info.Template.ResourceSlices) == 0 && c.info.TemplateSource == "provider" {
			// Say why, rather than leave a user hunting for devices.
			gr.Message += "; the cloud provider publishes no device template for node group " + c.info.Id +
				" (no ResourceSlices: an external gRPC server with neither the DRA extension nor upstream's resourceSliceBytes, or a group without a DRA template)"
		}
	}
	return gr
}
