package track

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
)

// instance is one of a group's instances as this pass sees it.
type instance struct {
	id string
	// node is its Node, nil while it has not registered.
	node    *corev1.Node
	usable  bool
	why     string // what a registered node still lacks
	created time.Time
	errInfo *cloudprovider.InstanceErrorInfo
	// gone: given up in this pass.
	gone bool
}

// view is one group's instances in one pass.
type view struct {
	info    *nodegroups.Info
	byID    map[string]*instance
	listErr error
	// unbacked is how much of the target no listed instance stands for
	// yet: only that much can be given up by lowering the target.
	unbacked int
}

// observe lists the group's instances and matches them with its nodes by
// providerID. A node the provider does not list (yet) is still known.
func observe(g *nodegroups.Info) *view {
	v := &view{info: g, byID: map[string]*instance{}}
	instances, err := g.Group.Nodes()
	if err != nil {
		v.listErr = fmt.Errorf("node group %s: listing instances: %w", g.Id, err)
	}
	for _, in := range instances {
		x := &instance{id: in.Id, created: in.CreatedAt}
		if in.Status != nil {
			x.errInfo = in.Status.ErrorInfo
		}
		v.byID[in.Id] = x
	}
	add := func(n *corev1.Node, usable bool) {
		id := n.Spec.ProviderID
		if id == "" {
			id = n.Name
		}
		x := v.byID[id]
		if x == nil {
			x = &instance{id: id}
			v.byID[id] = x
		}
		x.node, x.usable, x.why = n, usable, g.NotUsable[n.Name]
		if x.created.IsZero() {
			x.created = n.CreationTimestamp.Time
		}
	}
	for _, n := range g.Ready {
		add(n, true)
	}
	for _, n := range g.Booting {
		add(n, false)
	}
	v.unbacked = g.Upcoming()
	for _, x := range v.byID {
		if x.node == nil && x.errInfo == nil {
			v.unbacked--
		}
	}
	v.unbacked = max(v.unbacked, 0)
	return v
}

// unnamed picks up to n instances that never registered and that no
// request names: what a request the provider did not name stands for.
func (v *view) unnamed(reqs []*Request, n int) []string {
	named := map[string]bool{}
	for _, r := range reqs {
		for _, id := range r.Instances {
			named[id] = true
		}
	}
	var out []string
	for _, x := range v.sorted() {
		if len(out) == n {
			break
		}
		if x.node == nil && x.errInfo == nil && !x.gone && !named[x.id] {
			out = append(out, x.id)
		}
	}
	return out
}

// stillExpected keeps the ids that are neither usable nor gone.
func (v *view) stillExpected(ids []string) []string {
	out := ids[:0]
	for _, id := range ids {
		if x := v.byID[id]; x != nil && !x.usable && !x.gone {
			out = append(out, id)
		}
	}
	return out
}

// usableOf counts the instances of ids that are usable now.
func (v *view) usableOf(ids []string) int {
	n := 0
	for _, id := range ids {
		if x := v.byID[id]; x != nil && x.usable && !x.gone {
			n++
		}
	}
	return n
}

// lost tells whether one of ids is gone without having been usable:
// given up, failed, or deleted by someone else.
func (v *view) lost(ids []string) bool {
	for _, id := range ids {
		if x := v.byID[id]; x == nil || x.gone || x.errInfo != nil {
			return true
		}
	}
	return false
}

// anonymousUpcoming is how many of the group's expected nodes are not
// usable yet and not named by any request.
func (v *view) anonymousUpcoming(reqs []*Request) int {
	n := v.info.Target - len(v.info.Ready)
	for _, r := range reqs {
		n -= len(r.Instances)
	}
	return max(n, 0)
}

// giveUpInstances handles the instances that failed: those the provider
// reports as failed to create (quota, capacity) go at once; those past
// their own deadline (creation + max provision time) without ever having
// been usable go too. The requests they belonged to learn of it through
// the view.
func (t *Tracker) giveUpInstances(ctx context.Context, v *view, now time.Time) []Failure {
	if v.listErr != nil {
		return nil
	}
	g := v.info
	within := cmp.Or(g.Options.MaxNodeProvisionTime, t.maxProvision) // the group's own, or the flag's
	var failed, stuck []*instance
	for _, x := range v.sorted() {
		switch {
		case x.gone:
		case x.errInfo != nil:
			failed = append(failed, x)
		case !x.usable && !x.created.IsZero() && now.After(x.created.Add(within)) && !t.settled(g.Id, x.id):
			stuck = append(stuck, x)
		}
	}
	var failures []Failure
	if len(failed) > 0 {
		reason, msg := ReasonCloudProvider, failed[0].errInfo.ErrorMessage
		if failed[0].errInfo.ErrorClass == cloudprovider.OutOfResourcesErrorClass {
			reason = ReasonOutOfResources
		}
		deleted, err := t.giveUp(ctx, v, ids(failed), 0, reason, now)
		f := Failure{Group: g.Id, Reason: reason, Deleted: deleted, Nodes: names(failed),
			Message: fmt.Sprintf("%d instance(s) failed to start: %s", len(failed), msg)}
		if err != nil {
			f.Message += fmt.Sprintf("; removing them failed: %v", err)
		}
		// The actuator already backed the group off and counted the
		// failure when the request itself failed: only clean up.
		if _, off := t.backoff.Get(g.Id, now); !off {
			t.backoff.Fail(g.Id, f.Reason, now)
			failures = append(failures, f)
			klog.FromContext(ctx).Info("Instances failed to start; removed and group backed off", "nodeGroup", g.Id, "failed", len(failed), "reason", reason, "message", msg)
		}
	}
	if len(stuck) > 0 {
		reason, what := ReasonTimeout, describe(stuck)
		for _, x := range stuck {
			if x.node != nil {
				reason = ReasonNotUsable
			}
		}
		deleted, err := t.giveUp(ctx, v, ids(stuck), 0, reason, now)
		f := Failure{Group: g.Id, Reason: reason, Deleted: deleted, Nodes: names(stuck),
			Message: fmt.Sprintf("%d node(s) not usable within %s of their creation (%s)", len(stuck), within, what)}
		if err != nil {
			f.Message += fmt.Sprintf("; removing them failed: %v", err)
		}
		t.backoff.Fail(g.Id, reason, now)
		failures = append(failures, f)
		klog.FromContext(ctx).Info("Instances not usable within the provision time; given up and group backed off",
			"nodeGroup", g.Id, "count", len(stuck), "first", what, "deleted", deleted)
	}
	return failures
}

func (v *view) sorted() []*instance {
	out := make([]*instance, 0, len(v.byID))
	for _, x := range v.byID {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// describe says what the first of xs lacks, a registered node first:
// what a user can act on.
func describe(xs []*instance) string {
	for _, x := range xs {
		if x.node != nil {
			return fmt.Sprintf("node %s: %s", x.node.Name, x.why)
		}
	}
	return fmt.Sprintf("instance %s did not register", xs[0].id)
}

// names are the node names of xs, or their ids where not registered.
func names(xs []*instance) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.id
		if x.node != nil {
			out[i] = x.node.Name
		}
	}
	return out
}

func ids(xs []*instance) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.id
	}
	return out
}

// usableSince reads safety.UsableAnnotation of a registered node.
func usableSince(n *corev1.Node) (time.Time, bool) {
	if n == nil {
		return time.Time{}, false
	}
	return safety.UsableSince(n)
}

// nodeFor stands for an instance that has no Node object: providers find
// their instances by providerID.
func nodeFor(providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: providerID}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}
