// Package track follows every scale-up until its nodes are usable. Each
// request has its own deadline (--max-node-provision-time from when it was
// made), and each instance one of its own, counted from the creation time
// the provider records (or the Node's), so a restarted autoscaler gives up
// exactly what the old one would have. An instance that never registers,
// or registers but never becomes usable (NotReady, start-up taints,
// incomplete DRA pools), is given up: removed, the group backed off so the
// next-best group serves the pods.
//
// Giving up never destroys work: a registered node is removed only after
// it was tainted and a fresh list of its pods shows nothing but DaemonSet
// and mirror pods; otherwise it is released, kept and left to scale-down.
// Only instances a request created are ever touched, named by the ids the
// provider returned; a removal that fails is retried with backoff.
package track

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
)

// Failure reasons, as failed_scale_ups_total labels them.
const (
	ReasonTimeout        = "timeout"
	ReasonNotUsable      = "nodeNotUsable"
	ReasonOutOfResources = "outOfResources"
	ReasonCloudProvider  = "cloudProviderError"
)

// Request is one scale-up in flight.
type Request struct {
	Group string
	// Delta is how many of its nodes are still expected.
	Delta      int
	Time       time.Time
	ExpectedBy time.Time
	// Gang names the gang this request is a part of ("" for none).
	Gang string
	// Instances are the ids of the expected nodes the provider named when
	// it was asked; the rest of Delta is counted, not named.
	Instances []string
	// Attempt numbers the gang scale-up (one per try of a gang), 0 for none.
	Attempt uint64
	// MaxProvision is how long its nodes may take to become usable: the
	// group's own max node provision time; 0: the tracker's (the flag).
	MaxProvision time.Duration
}

// anonymous is how much of Delta the provider did not name.
func (r *Request) anonymous() int { return max(r.Delta-len(r.Instances), 0) }

// Failure is a scale-up given up in this loop.
type Failure struct {
	Group   string
	Reason  string
	Message string
	// Deleted are the instances removed because they never became usable.
	Deleted int
	// Nodes names the instances given up (node names where registered).
	Nodes []string
}

// Tracker holds the requests in flight. Safe for concurrent reads (the
// status writer) with the loop's writes.
type Tracker struct {
	maxProvision time.Duration
	backoff      *backoff.Backoff
	client       kubernetes.Interface
	// gate is asked before any registered node is removed; marker
	// writes safety.UsableAnnotation on the nodes seen usable, so a
	// later process knows them too.
	gate   *safety.Gate
	marker *safety.Marker

	mu       sync.Mutex
	requests map[string][]*Request
	gangs    []*gangAttempt
	seq      uint64
	// usable are the instances seen usable, by group (by this process,
	// or by any, through safety.UsableAnnotation): one that later turns
	// NotReady is a scale-down matter, not a failed provision.
	// released are nodes of given-up scale-ups kept because they hold
	// work: scale-down's from then on, never judged again.
	usable   map[string]map[string]bool
	released map[string]map[string]bool
	removals []*removal
	errors   []RemovalError
	// took are, by group, the times from request to usable node of the
	// group's last ProvisionSamples nodes, oldest first.
	took map[string][]time.Duration
}

// ProvisionSamples is how many of a group's last nodes ProvisionTimes
// keeps.
const ProvisionSamples = 20

// New returns a tracker that gives requests maxProvision to register.
func New(maxProvision time.Duration, b *backoff.Backoff) *Tracker {
	return &Tracker{maxProvision: maxProvision, backoff: b, requests: map[string][]*Request{},
		usable: map[string]map[string]bool{}, released: map[string]map[string]bool{},
		took: map[string][]time.Duration{}}
}

// ProvisionTimes are the times from request to usable node of the
// group's last nodes (at most ProvisionSamples), oldest first, as the
// passes saw them: each is a whole number of passes late at most.
func (t *Tracker) ProvisionTimes(group string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Duration(nil), t.took[group]...)
}

// tookLocked records n nodes of group usable d after their request.
// t.mu is held.
func (t *Tracker) tookLocked(group string, d time.Duration, n int) {
	s := t.took[group]
	for range n {
		s = append(s, max(d, 0))
	}
	if len(s) > ProvisionSamples {
		s = append([]time.Duration(nil), s[len(s)-ProvisionSamples:]...)
	}
	t.took[group] = s
}

// WithClient lets the tracker taint registered nodes and list their pods
// before it removes them, and mark the nodes it sees usable; without a
// client it never removes a registered node, it only releases it.
func (t *Tracker) WithClient(c kubernetes.Interface) *Tracker {
	t.client = c
	t.marker = safety.NewMarker(c)
	return t
}

// WithGate has the tracker ask g before it removes a registered node.
func (t *Tracker) WithGate(g *safety.Gate) *Tracker {
	t.gate = g
	return t
}

// Requested records that group was asked for delta more nodes at now,
// none of them named by the provider.
func (t *Tracker) Requested(group string, delta int, now time.Time) {
	t.Launched(Request{Group: group, Delta: delta}, now)
}

// Launched records a request: Group, Delta, and the Instances the provider
// named (and Gang, for a part of a gang). Its deadline starts now.
func (t *Tracker) Launched(r Request, now time.Time) {
	if r.Delta <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Instances = append([]string(nil), r.Instances...)
	r.Time, r.ExpectedBy = now, now.Add(cmp.Or(r.MaxProvision, t.maxProvision))
	t.requests[r.Group] = append(t.requests[r.Group], &r)
	if r.Attempt != 0 {
		t.addToGangLocked(r.Attempt, r.Group, r.Instances, r.ExpectedBy)
	}
}

// InFlight returns the requests of every group, oldest first.
func (t *Tracker) InFlight() []Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Request
	for _, rs := range t.requests {
		for _, r := range rs {
			c := *r
			c.Instances = append([]string(nil), r.Instances...)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Time.Before(out[j].Time) || out[i].Time.Equal(out[j].Time) && out[i].Group < out[j].Group
	})
	return out
}

// Update matches requests with what became usable, gives up instances and
// requests past their deadline, undoes failed gangs and retries removals
// that failed before.
func (t *Tracker) Update(ctx context.Context, groups []*nodegroups.Info, now time.Time) []Failure {
	views := make(map[string]*view, len(groups))
	var usable []*corev1.Node
	for _, g := range groups {
		v := observe(g)
		if v.listErr != nil {
			klog.FromContext(ctx).Error(v.listErr, "Listing instances failed; nothing of the group is given up in this pass", "nodeGroup", g.Id)
			t.recordError(RemovalError{Group: g.Id, Op: "list", Err: v.listErr})
		}
		views[g.Id] = v
		t.markUsable(v)
		usable = append(usable, g.Ready...)
	}
	t.marker.Mark(ctx, usable, now)
	t.retryRemovals(ctx, views, now)
	// Gangs first: an attempt past its deadline is undone as a whole
	// before its instances are judged one by one.
	failures := t.updateGangs(ctx, views, now)
	for _, g := range groups {
		failures = append(failures, t.giveUpInstances(ctx, views[g.Id], now)...)
	}
	for _, g := range groups {
		if f := t.updateRequests(ctx, views[g.Id], now); f != nil {
			failures = append(failures, *f)
		}
	}
	return failures
}

// markUsable remembers the group's usable instances and forgets the
// instances the group no longer has.
func (t *Tracker) markUsable(v *view) {
	if v.listErr != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	id := v.info.Id
	usable, released := map[string]bool{}, map[string]bool{}
	for x, in := range v.byID {
		_, once := usableSince(in.node)
		if in.usable || once || t.usable[id][x] {
			usable[x] = true
		}
		if t.released[id][x] {
			released[x] = true
		}
	}
	t.usable[id], t.released[id] = usable, released
}

// settled tells whether the instance is past judging: seen usable, or
// released to scale-down.
func (t *Tracker) settled(group, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usable[group][id] || t.released[group][id]
}

func (t *Tracker) release(group, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.released[group] == nil {
		t.released[group] = map[string]bool{}
	}
	t.released[group][id] = true
}

// updateRequests matches the group's requests, oldest first, with what
// became usable, and gives up each request that is past its own deadline.
func (t *Tracker) updateRequests(ctx context.Context, v *view, now time.Time) *Failure {
	g := v.info
	logger := klog.FromContext(ctx).WithValues("nodeGroup", g.Id)
	t.mu.Lock()
	reqs := t.requests[g.Id]
	hadRequests := len(reqs) > 0
	// Named instances are done when usable, and dropped when gone or
	// given up (the failure was reported when that happened).
	anonymous, lost := 0, false
	for _, r := range reqs {
		if v.listErr == nil {
			before := len(r.Instances)
			lost = lost || v.lost(r.Instances)
			t.tookLocked(g.Id, now.Sub(r.Time), v.usableOf(r.Instances))
			r.Instances = v.stillExpected(r.Instances)
			r.Delta -= before - len(r.Instances)
		}
		anonymous += r.anonymous()
	}
	// Unnamed nodes are counted: usable nodes fulfil the oldest first.
	for done := anonymous - v.anonymousUpcoming(reqs); done > 0; {
		r := firstAnonymous(reqs)
		if r == nil {
			break
		}
		n := min(done, r.anonymous())
		r.Delta -= n
		done -= n
		t.tookLocked(g.Id, now.Sub(r.Time), n)
	}
	var expired []*Request
	keep := reqs[:0]
	for _, r := range reqs {
		switch {
		case r.Delta == 0:
		case r.Gang == "" && now.After(r.ExpectedBy) && v.listErr == nil:
			expired = append(expired, r)
		default:
			keep = append(keep, r)
		}
	}
	t.requests[g.Id] = keep
	t.mu.Unlock()
	// Instances given up or gone are failures, reported where they were
	// found: a request they leave empty did not succeed.
	if hadRequests && len(keep) == 0 && len(expired) == 0 && !lost {
		t.backoff.Succeeded(g.Id)
		logger.V(2).Info("Scale-up complete: every requested node is usable")
		return nil
	}
	if len(expired) == 0 {
		return nil
	}
	missing, deleted := 0, 0
	var errs []error
	var given []*instance
	var within time.Duration
	for _, r := range expired {
		missing += r.Delta
		within = max(within, r.ExpectedBy.Sub(r.Time))
		// What the provider did not name: instances no request names
		// first, then the target not backed by any instance.
		ids := append(r.Instances, v.unnamed(keep, r.anonymous())...)
		for _, id := range ids {
			if x := v.byID[id]; x != nil && !x.gone {
				given = append(given, x)
			}
		}
		d, err := t.giveUp(ctx, v, ids, r.Delta-len(ids), ReasonTimeout, now)
		deleted += d
		if err != nil {
			errs = append(errs, err)
		}
	}
	f := &Failure{Group: g.Id, Reason: ReasonTimeout, Deleted: deleted, Nodes: names(given),
		Message: fmt.Sprintf("%d node(s) did not become usable within %s", missing, within)}
	if len(given) > 0 {
		f.Message += " (" + describe(given) + ")"
	}
	if len(errs) > 0 {
		f.Message += fmt.Sprintf("; removing them failed: %v", errs[0])
	}
	t.backoff.Fail(g.Id, f.Reason, now)
	logger.Info("Scale-up timed out; its nodes that never became usable are given up and the group is backed off",
		"missing", missing, "deleted", deleted)
	return f
}

func firstAnonymous(reqs []*Request) *Request {
	for _, r := range reqs {
		if r.anonymous() > 0 {
			return r
		}
	}
	return nil
}
