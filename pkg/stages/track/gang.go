package track

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// ReasonGangTimeout labels a gang scale-up given up because some of its
// nodes never registered.
const ReasonGangTimeout = "gangTimeout"

// gangRequest is the instances created for one gang, across groups. The
// gang runs only when all of them register; if they do not in time, all
// of them go, the registered ones too: half a gang's capacity is waste.
type gangRequest struct {
	instances  map[string][]string // group -> provider ids
	expectedBy time.Time
}

// RequestedGang records the instances created for gang in group.
func (t *Tracker) RequestedGang(gang, group string, instances []string, now time.Time) {
	if len(instances) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.gangs[gang]
	if r == nil {
		r = &gangRequest{instances: map[string][]string{}, expectedBy: now.Add(t.maxProvision)}
		t.gangs[gang] = r
	}
	r.instances[group] = append(r.instances[group], instances...)
}

// updateGangs forgets gangs whose instances all registered and removes
// every instance of gangs past their deadline.
func (t *Tracker) updateGangs(ctx context.Context, groups []*nodegroups.Info, now time.Time) []Failure {
	registered := map[string]bool{}
	byID := map[string]*nodegroups.Info{}
	for _, g := range groups {
		byID[g.Id] = g
		for _, n := range append(append([]*corev1.Node(nil), g.Ready...), g.Booting...) {
			registered[n.Spec.ProviderID] = true
		}
	}
	t.mu.Lock()
	keys := make([]string, 0, len(t.gangs))
	for k := range t.gangs {
		keys = append(keys, k)
	}
	t.mu.Unlock()
	sort.Strings(keys)
	var failures []Failure
	for _, key := range keys {
		t.mu.Lock()
		r := t.gangs[key]
		t.mu.Unlock()
		missing := 0
		for _, ids := range r.instances {
			for _, id := range ids {
				if !registered[id] {
					missing++
				}
			}
		}
		switch {
		case missing == 0:
			t.mu.Lock()
			delete(t.gangs, key)
			t.mu.Unlock()
		case now.After(r.expectedBy):
			failures = append(failures, t.giveUpGang(ctx, key, r, missing, byID, now)...)
		}
	}
	return failures
}

func (t *Tracker) giveUpGang(ctx context.Context, key string, r *gangRequest, missing int, byID map[string]*nodegroups.Info, now time.Time) []Failure {
	logger := klog.FromContext(ctx).WithValues("gang", key)
	var failures []Failure
	for group, ids := range r.instances {
		g := byID[group]
		if g == nil {
			continue
		}
		nodes := make([]*corev1.Node, 0, len(ids))
		for _, id := range ids {
			nodes = append(nodes, nodeFor(id))
		}
		f := Failure{Group: group, Reason: ReasonGangTimeout, Deleted: len(ids),
			Message: fmt.Sprintf("gang %s: %d node(s) did not register within %s; all %d of its nodes in this group removed", key, missing, t.maxProvision, len(ids))}
		if err := g.Group.ForceDeleteNodes(ctx, nodes); err != nil {
			f.Message += fmt.Sprintf("; removing them failed: %v", err)
			f.Deleted = 0
		}
		t.fail(group, &f, now)
		failures = append(failures, f)
		logger.Info("Gang scale-up timed out; every node added for it is removed", "nodeGroup", group, "removed", len(ids))
	}
	t.mu.Lock()
	delete(t.gangs, key)
	t.mu.Unlock()
	return failures
}

// ForgetGang drops a gang's request (its scale-up was undone at once).
func (t *Tracker) ForgetGang(gang string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.gangs, gang)
}
