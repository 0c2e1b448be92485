package track_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// fleet is one fake group and the API objects behind its registered nodes.
type fleet struct {
	g      *fakeprovider.FakeNodeGroup
	ready  []*corev1.Node
	boot   []*corev1.Node
	why    map[string]string
	client *fake.Clientset
}

func newFleet(id string, objects ...runtime.Object) *fleet {
	return &fleet{g: fakeprovider.NewGroup(id, 0, 20), why: map[string]string{}, client: fake.NewClientset(objects...)}
}

// launch asks the group for n nodes the way the actuator does and returns
// the ids the provider named.
func (f *fleet) launch(t *testing.T, tr *track.Tracker, n int, gang string, attempt uint64, at time.Time) []string {
	t.Helper()
	ids, err := f.g.IncreaseSize(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	tr.Launched(track.Request{Group: f.g.Id(), Delta: n, Gang: gang, Attempt: attempt, Instances: ids}, at)
	return ids
}

// register gives the instance a Node (in the API server too): usable, or
// not with why.
func (f *fleet) register(t *testing.T, id string, created time.Time, why string) *corev1.Node {
	t.Helper()
	n := builder.Node(strings.ReplaceAll(strings.TrimPrefix(id, "fake://"), "/", "-")).Obj()
	n.Spec.ProviderID = id
	n.CreationTimestamp = metav1.NewTime(created)
	if _, err := f.client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if why == "" {
		f.ready = append(f.ready, n)
	} else {
		f.boot = append(f.boot, n)
		f.why[n.Name] = why
	}
	return n
}

// run puts a pod (not a DaemonSet's) on the node.
func (f *fleet) run(t *testing.T, pod string, node *corev1.Node) {
	t.Helper()
	p := builder.Pod("team", pod).Node(node.Name).Obj()
	if _, err := f.client.CoreV1().Pods("team").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// existing is the group's only instance, in state, created at created,
// that no request of this tracker knows (as after a restart).
func (f *fleet) existing(state cloudprovider.InstanceState, created time.Time) string {
	id := f.g.AddInstance(state, nil)
	f.g.SetTarget(1)
	f.g.SetCreatedAt(id, created)
	return id
}

func (f *fleet) info() *nodegroups.Info {
	return &nodegroups.Info{Group: f.g, Id: f.g.Id(), Max: f.g.MaxSize(), Target: f.g.Target(), Ready: f.ready, Booting: f.boot, NotUsable: f.why}
}

func deleted(g *fakeprovider.FakeNodeGroup) []string {
	var out []string
	for _, c := range g.Calls() {
		if c.Method == "ForceDeleteNodes" || c.Method == "DeleteNodes" {
			out = append(out, c.Nodes...)
		}
	}
	return out
}

// A gang attempt that times out: the instance that never registered goes,
// the registered node that holds no work goes, and the registered node the
// scheduler filled with another gang's pod is released: kept, untainted.
func TestGangUndoNeverDestroysWork(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	b := newBackoff()
	tr := track.New(maxProvision, b).WithClient(f.client)
	attempt := tr.StartGang("team/train", t0)
	ids := f.launch(t, tr, 3, "team/train", attempt, t0)
	f.register(t, ids[0], t0.Add(time.Minute), "")
	busy := f.register(t, ids[1], t0.Add(time.Minute), "")
	f.run(t, "other-gang-0", busy)

	if got := tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision)); len(got) != 0 {
		t.Fatalf("failures before the deadline: %+v", got)
	}
	failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision+time.Second))
	if len(failures) != 1 || failures[0].Reason != track.ReasonGangTimeout || failures[0].Deleted != 2 {
		t.Fatalf("failures = %+v, want one gang timeout removing 2", failures)
	}
	if diff := cmp.Diff([]string{ids[0], ids[2]}, slices.Sorted(slices.Values(deleted(f.g)))); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	n, err := f.client.CoreV1().Nodes().Get(t.Context(), busy.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("released node keeps taints %v", n.Spec.Taints)
	}
	if r := tr.InFlight(); len(r) != 0 {
		t.Errorf("in flight after the undo: %+v", r)
	}
}

// Without an API client nothing proves a registered node is empty: it is
// released, never removed.
func TestGiveUpWithoutClientKeepsRegisteredNodes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff())
	attempt := tr.StartGang("team/train", t0)
	ids := f.launch(t, tr, 2, "team/train", attempt, t0)
	f.register(t, ids[0], t0, "")
	tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision+time.Second))
	if diff := cmp.Diff([]string{ids[1]}, deleted(f.g)); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// A retry of a gang is a new attempt with its own clock, and a request's
// deadline is its own: the first attempt's timeout touches neither the
// second attempt nor a later plain request.
func TestEachRequestHasItsOwnDeadline(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	first := f.launch(t, tr, 1, "team/train", tr.StartGang("team/train", t0), t0)
	later := t0.Add(10 * time.Minute)
	second := f.launch(t, tr, 1, "team/train", tr.StartGang("team/train", later), later)
	plain := f.launch(t, tr, 1, "", 0, later)

	tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision+time.Second))
	if diff := cmp.Diff(first, deleted(f.g)); diff != "" {
		t.Errorf("removed at the first deadline (-want +got):\n%s", diff)
	}
	// The later ones register in time and stay.
	f.register(t, second[0], later.Add(time.Minute), "")
	f.register(t, plain[0], later.Add(time.Minute), "")
	tr.Update(ctx, []*nodegroups.Info{f.info()}, later.Add(maxProvision+time.Second))
	if diff := cmp.Diff(first, deleted(f.g)); diff != "" {
		t.Errorf("removed in all (-want +got):\n%s", diff)
	}
	if r := tr.InFlight(); len(r) != 0 {
		t.Errorf("in flight: %+v", r)
	}
}

// A gang across two groups whose nodes in "a" all came and in "b" did
// not: only b is backed off; a's empty node still goes with the gang.
func TestGangBacksOffOnlyTheGroupThatFailed(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	a, bg := newFleet("a"), newFleet("b")
	b := newBackoff()
	tr := track.New(maxProvision, b).WithClient(a.client)
	attempt := tr.StartGang("team/train", t0)
	ida := a.launch(t, tr, 1, "team/train", attempt, t0)
	bg.launch(t, tr, 1, "team/train", attempt, t0)
	a.register(t, ida[0], t0, "")
	now := t0.Add(maxProvision + time.Second)
	failures := tr.Update(ctx, []*nodegroups.Info{a.info(), bg.info()}, now)
	if len(failures) != 1 || failures[0].Group != "b" {
		t.Fatalf("failures = %+v, want only b's", failures)
	}
	if _, off := b.Get("a", now); off {
		t.Error("group a backed off for b's failure")
	}
	if _, off := b.Get("b", now); !off {
		t.Error("group b not backed off")
	}
	if diff := cmp.Diff(ida, deleted(a.g)); diff != "" {
		t.Errorf("a's removals (-want +got):\n%s", diff)
	}
}

// Instances are judged by their own creation time, which the provider
// keeps: a tracker that never saw the request (a restarted autoscaler)
// gives up exactly the instances the old one would have, and a node that
// registered but never became usable goes the same way, named with what
// it lacks.
func TestInstanceDeadlinesSurviveARestart(t *testing.T) {
	tests := []struct {
		name    string
		created time.Duration // before now
		why     string        // "" unregistered
		want    string        // reason, "" for none
	}{
		{"never registered, past its deadline", maxProvision + time.Second, "-", track.ReasonTimeout},
		{"never registered, within its deadline", maxProvision - time.Second, "-", ""},
		{"registered, pool incomplete, past its deadline", maxProvision + time.Second, "driver gpu.example.com: pool n has 1 of 3 slices", track.ReasonNotUsable},
		{"registered, NotReady, within its deadline", maxProvision - time.Second, "node is not Ready", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			now := t0.Add(time.Hour)
			f := newFleet("gpu")
			id := f.existing(cloudprovider.InstanceCreating, now.Add(-tc.created))
			if tc.why != "-" {
				f.register(t, id, now.Add(-tc.created), tc.why)
			}
			tr := track.New(maxProvision, newBackoff()).WithClient(f.client) // fresh: no request known
			failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, now)
			if tc.want == "" {
				if len(failures) != 0 || len(deleted(f.g)) != 0 {
					t.Fatalf("failures %+v, removed %v; want none", failures, deleted(f.g))
				}
				return
			}
			if len(failures) != 1 || failures[0].Reason != tc.want || len(deleted(f.g)) != 1 {
				t.Fatalf("failures %+v, removed %v; want one %s", failures, deleted(f.g), tc.want)
			}
			if tc.why != "-" && !strings.Contains(failures[0].Message, tc.why) {
				t.Errorf("message %q does not say what is missing (%q)", failures[0].Message, tc.why)
			}
		})
	}
}

// A node once seen usable that turns NotReady is not a failed provision.
func TestOnceUsableNodeIsNotGivenUp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	id := f.existing(cloudprovider.InstanceRunning, t0)
	n := f.register(t, id, t0, "")
	tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(time.Minute))
	f.ready, f.boot, f.why[n.Name] = nil, []*corev1.Node{n}, "node is not Ready"
	if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(2*maxProvision)); len(failures) != 0 || len(deleted(f.g)) != 0 {
		t.Fatalf("failures %+v, removed %v; want none", failures, deleted(f.g))
	}
}

// Provider errors are never swallowed: a failed Nodes() stops every
// judgement of the group for the pass and is reported; a failed removal
// is reported and retried with backoff until it works.
func TestProviderErrorsAreReportedAndRetried(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	ids := f.launch(t, tr, 1, "", 0, t0)
	late := t0.Add(maxProvision + time.Second)

	f.g.Fail("Nodes", errors.New("throttled"))
	if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, late); len(failures) != 0 {
		t.Fatalf("failures while instances cannot be listed: %+v", failures)
	}
	if errs := tr.TakeErrors(); len(errs) != 1 || errs[0].Op != "list" || !strings.Contains(errs[0].Err.Error(), "throttled") {
		t.Fatalf("errors = %+v, want the list error", errs)
	}
	f.g.Fail("Nodes", nil)

	f.g.Fail("ForceDeleteNodes", errors.New("API down"))
	if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, late); len(failures) != 1 || !strings.Contains(failures[0].Message, "API down") {
		t.Fatalf("failures = %+v, want the timeout with the removal error", failures)
	}
	if errs := tr.TakeErrors(); len(errs) != 1 || errs[0].Op != "delete" || errs[0].Nodes[0] != ids[0] {
		t.Fatalf("errors = %+v, want the delete error naming %s", errs, ids[0])
	}
	calls := func() int { return len(f.g.Calls()) }
	before := calls()
	tr.Update(ctx, []*nodegroups.Info{f.info()}, late.Add(time.Second))
	if calls() != before {
		t.Errorf("retried before its backoff: %+v", f.g.Calls()[before:])
	}
	tr.Update(ctx, []*nodegroups.Info{f.info()}, late.Add(11*time.Second))
	if errs := tr.TakeErrors(); len(errs) != 1 {
		t.Errorf("second failure not reported: %+v", errs)
	}
	f.g.Fail("ForceDeleteNodes", nil)
	tr.Update(ctx, []*nodegroups.Info{f.info()}, late.Add(time.Minute))
	if instances, _ := f.g.Nodes(); len(instances) != 0 {
		t.Errorf("instances left after the retry: %+v", instances)
	}
}

// An instance given up on its own deadline is a failure of its request:
// the request leaves with it, and the group stays backed off.
func TestGivenUpInstanceIsNoSuccess(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	b := newBackoff()
	tr := track.New(maxProvision, b).WithClient(f.client)
	ids := f.launch(t, tr, 1, "", 0, t0)
	f.g.SetCreatedAt(ids[0], t0)
	now := t0.Add(maxProvision + time.Second)
	if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, now); len(failures) != 1 {
		t.Fatalf("failures = %+v, want one", failures)
	}
	if _, off := b.Get("gpu", now); !off {
		t.Error("the group is not backed off after its instance was given up")
	}
	if r := tr.InFlight(); len(r) != 0 {
		t.Errorf("in flight: %+v", r)
	}
}

// A node that never became usable but holds work is released once and
// never judged again: no failure every pass.
func TestReleasedNodeIsJudgedOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	id := f.existing(cloudprovider.InstanceRunning, t0)
	n := f.register(t, id, t0, "node is not Ready")
	f.run(t, "stuck", n)
	now := t0.Add(maxProvision + time.Second)
	if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, now); len(failures) != 1 {
		t.Fatalf("first judgement: %+v, want one failure", failures)
	}
	for i := range 3 {
		if failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, now.Add(time.Duration(i+1)*time.Minute)); len(failures) != 0 {
			t.Fatalf("pass %d judged the released node again: %+v", i, failures)
		}
	}
	if got := deleted(f.g); len(got) != 0 {
		t.Errorf("removed %v, a node that runs a pod", got)
	}
}

// A provider that names no instances when asked (Cluster API): undoing a
// gang attempt takes the group's instances created since its request and
// before another unnamed request of the group, never one that was there
// before, never the other request's; the busy one is still released.
// Creation times are whole seconds, as an API server writes them: an
// instance made in its request's second reads as made before it.
func TestGangUndoOfAnUnnamedScaleUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		// asked and created offset the attempt's request and its
		// instances' creation from t0; otherAsked and otherCreated the
		// later request of another gang and its instance.
		asked, created, otherAsked, otherCreated time.Duration
	}{
		{name: "created a second later", created: time.Second, otherAsked: 10 * time.Second, otherCreated: 11 * time.Second},
		{name: "created in the request's second", asked: 300 * time.Millisecond, otherAsked: 10 * time.Second, otherCreated: 11 * time.Second},
		{name: "the other created in its request's second", created: time.Second, otherAsked: 10600 * time.Millisecond, otherCreated: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFleet("gpu")
			tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
			before := f.existing(cloudprovider.InstanceRunning, t0.Add(-time.Hour))
			f.register(t, before, t0.Add(-time.Hour), "")
			asked := t0.Add(tc.asked)
			attempt := tr.StartGang("team/train", asked)
			ids, err := f.g.IncreaseSize(t.Context(), 3)
			if err != nil {
				t.Fatal(err)
			}
			tr.Launched(track.Request{Group: f.g.Id(), Delta: 3, Gang: "team/train", Attempt: attempt}, asked)
			for _, id := range ids {
				f.g.SetCreatedAt(id, t0.Add(tc.created))
			}
			f.register(t, ids[0], t0.Add(time.Minute), "")
			busy := f.register(t, ids[1], t0.Add(time.Minute), "")
			f.run(t, "other-0", busy)
			// Another gang's unnamed request, later: its instance is not ours.
			otherAttempt := tr.StartGang("team/other", t0.Add(tc.otherAsked))
			other, err := f.g.IncreaseSize(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			tr.Launched(track.Request{Group: f.g.Id(), Delta: 1, Gang: "team/other", Attempt: otherAttempt}, t0.Add(tc.otherAsked))
			f.g.SetCreatedAt(other[0], t0.Add(tc.otherCreated))
			// A pass before the deadline counts the two usable nodes against the
			// request: they are still the attempt's.
			if got := tr.Update(ctx, []*nodegroups.Info{f.info()}, asked.Add(maxProvision/2)); len(got) != 0 {
				t.Fatalf("failures before the deadline: %+v", got)
			}

			failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, asked.Add(maxProvision+time.Second))
			if len(failures) != 1 || failures[0].Reason != track.ReasonGangTimeout || failures[0].Deleted != 2 {
				t.Fatalf("failures = %+v, want one gang timeout removing 2", failures)
			}
			if diff := cmp.Diff([]string{ids[0], ids[2]}, slices.Sorted(slices.Values(deleted(f.g)))); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			for _, r := range tr.InFlight() {
				if r.Gang != "team/other" {
					t.Errorf("still in flight: %+v", r)
				}
			}
		})
	}
}
