package track

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// ReasonGangTimeout labels a gang scale-up given up because some of its
// nodes did not become usable in time.
const ReasonGangTimeout = "gangTimeout"

// gangAttempt is one try at a gang's scale-up, across groups, with its own
// deadline: a retry is a new attempt and never inherits an older clock.
// The gang runs only when every node of the attempt is usable; if that
// does not happen in time the attempt is undone: what never became usable
// goes, and so do its usable nodes that hold no work (half a gang's
// capacity is waste); usable nodes the scheduler filled with other pods
// are released instead. So the undo never splits another group whose
// members may only be disrupted together (drainability.Gangs): a node
// running any pod that does not go with the node, a member of such a
// group included, is never removed (holdsWork, on a fresh list after the
// taint; TestGangUndoNeverDestroysWork).
type gangAttempt struct {
	gang       string
	seq        uint64
	ids        map[string][]string // group -> every instance id created
	expectedBy time.Time
}

// StartGang opens a new attempt at gang's scale-up and returns its number,
// for Launched's Request.Attempt.
func (t *Tracker) StartGang(gang string, now time.Time) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.gangs = append(t.gangs, &gangAttempt{gang: gang, seq: t.seq, ids: map[string][]string{}, expectedBy: now.Add(t.maxProvision)})
	return t.seq
}

// addToGang records ids as part of attempt seq. t.mu is held.
func (t *Tracker) addToGangLocked(seq uint64, group string, ids []string, expectedBy time.Time) {
	for _, a := range t.gangs {
		if a.seq == seq {
			a.ids[group] = append(a.ids[group], ids...)
			// A part in a group of a longer provision time moves the
			// attempt's deadline on.
			if expectedBy.After(a.expectedBy) {
				a.expectedBy = expectedBy
			}
		}
	}
}

// updateGangs forgets attempts whose nodes are all usable and undoes those
// past their deadline or with an instance that failed.
func (t *Tracker) updateGangs(ctx context.Context, views map[string]*view, now time.Time) []Failure {
	t.mu.Lock()
	attempts := append([]*gangAttempt(nil), t.gangs...)
	t.mu.Unlock()
	var failures []Failure
	for _, a := range attempts {
		missing, failed, judged := t.gangState(a, views)
		if !judged {
			continue // a group's instances could not be listed: wait
		}
		switch {
		case missing == 0:
			t.forgetAttempt(a.seq)
		case failed || now.After(a.expectedBy):
			failures = append(failures, t.undo(ctx, a, views, now)...)
		}
	}
	return failures
}

// gangState counts the attempt's nodes not usable yet (named or not), and
// whether one of them failed for good.
func (t *Tracker) gangState(a *gangAttempt, views map[string]*view) (missing int, failed, judged bool) {
	for group, ids := range a.ids {
		v := views[group]
		if v == nil || v.listErr != nil {
			return 0, false, false
		}
		for _, id := range ids {
			x := v.byID[id]
			switch {
			case x == nil || x.gone || x.errInfo != nil:
				missing++
				failed = true
			case !x.usable:
				missing++
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, rs := range t.requests {
		for _, r := range rs {
			if r.Attempt == a.seq {
				missing += r.anonymous()
			}
		}
	}
	return missing, failed, true
}

// UndoGang undoes attempt at once (a part of its scale-up failed when it
// was asked for), over the groups as this pass saw them.
func (t *Tracker) UndoGang(ctx context.Context, attempt uint64, groups []*nodegroups.Info, now time.Time) {
	t.mu.Lock()
	var a *gangAttempt
	for _, x := range t.gangs {
		if x.seq == attempt {
			a = x
		}
	}
	t.mu.Unlock()
	if a == nil {
		return
	}
	views := map[string]*view{}
	for _, g := range groups {
		views[g.Id] = observe(g)
	}
	// The failed part was backed off by whoever saw it fail; the
	// others are not to blame.
	t.undoParts(ctx, a, views, now)
}

// undo gives the attempt up and backs off the groups whose nodes failed
// it; the groups whose nodes all came are not to blame.
func (t *Tracker) undo(ctx context.Context, a *gangAttempt, views map[string]*view, now time.Time) []Failure {
	logger := klog.FromContext(ctx).WithValues("gang", a.gang)
	blamed := map[string]int{}
	for group, ids := range a.ids {
		v := views[group]
		for _, id := range ids {
			if x := v.byID[id]; x == nil || !x.usable {
				blamed[group]++
			}
		}
	}
	t.mu.Lock()
	for _, rs := range t.requests {
		for _, r := range rs {
			if r.Attempt == a.seq && r.anonymous() > 0 {
				blamed[r.Group] += r.anonymous()
			}
		}
	}
	t.mu.Unlock()
	deleted := t.undoParts(ctx, a, views, now)
	groups := make([]string, 0, len(blamed))
	for g := range blamed {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var failures []Failure
	for _, group := range groups {
		f := Failure{Group: group, Reason: ReasonGangTimeout, Deleted: deleted[group],
			Message: fmt.Sprintf("gang %s: %d node(s) did not become usable by %s; the gang's nodes the provider named that hold no work were removed, the others released", a.gang, blamed[group], a.expectedBy.Format(time.RFC3339))}
		t.backoff.Fail(group, f.Reason, now)
		failures = append(failures, f)
		logger.Info("Gang scale-up given up; its nodes the provider named that hold no work are removed, the others released", "nodeGroup", group, "missing", blamed[group], "removed", deleted[group])
	}
	return failures
}

// undoParts gives up every instance of the attempt and drops its requests;
// it returns how many instances were removed per group. Only instances
// proven to be the attempt's are given up: those the provider named when
// asked. What a provider that names no instances (Cluster API) created
// cannot be told from instances created meanwhile by anyone else (a
// MachineHealthCheck's replacement), so it is released: a node that
// never registers goes at its own deadline, one that registers is
// scale-down's. The part of such a request no instance stands for yet is
// given up by lowering the target.
func (t *Tracker) undoParts(ctx context.Context, a *gangAttempt, views map[string]*view, now time.Time) map[string]int {
	anonymous := map[string]int{}
	t.mu.Lock()
	for g, rs := range t.requests {
		keep := rs[:0]
		for _, r := range rs {
			if r.Attempt == a.seq {
				anonymous[g] += r.anonymous()
				continue
			}
			keep = append(keep, r)
		}
		t.requests[g] = keep
	}
	t.mu.Unlock()
	deleted := map[string]int{}
	groups := map[string]bool{}
	for group := range a.ids {
		groups[group] = true
	}
	for group := range anonymous {
		groups[group] = true
	}
	for group := range groups {
		v := views[group]
		if v == nil {
			continue
		}
		n, err := t.giveUp(ctx, v, a.ids[group], anonymous[group], ReasonGangTimeout, now)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Removing the nodes of a given-up gang scale-up failed; retried later", "gang", a.gang, "nodeGroup", group)
		}
		deleted[group] = n
	}
	t.forgetAttempt(a.seq)
	return deleted
}

func (t *Tracker) forgetAttempt(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := t.gangs[:0]
	for _, a := range t.gangs {
		if a.seq != seq {
			keep = append(keep, a)
		}
	}
	t.gangs = keep
}
