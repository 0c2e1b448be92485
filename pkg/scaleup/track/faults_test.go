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
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
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
// it lacks. A node an earlier process saw usable (it carries
// safety.UsableAnnotation) is never a failed provision, however unusable
// it is after the restart.
func TestInstanceDeadlinesSurviveARestart(t *testing.T) {
	tests := []struct {
		name    string
		created time.Duration // before now
		why     string        // "" unregistered
		once    bool          // marked usable by an earlier process
		want    string        // reason, "" for none
	}{
		{"never registered, past its deadline", maxProvision + time.Second, "-", false, track.ReasonTimeout},
		{"never registered, within its deadline", maxProvision - time.Second, "-", false, ""},
		{"registered, pool incomplete, past its deadline", maxProvision + time.Second, "driver gpu.example.com: pool n has 1 of 3 slices", false, track.ReasonNotUsable},
		{"registered, NotReady, within its deadline", maxProvision - time.Second, "node is not Ready", false, ""},
		{"usable before the restart, NotReady after it, past its deadline", maxProvision + time.Second, "node is not Ready", true, ""},
		{"usable before the restart, pool mid-republish, past its deadline", maxProvision + time.Second, "driver gpu.example.com: pool n has 1 of 3 slices", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			now := t0.Add(time.Hour)
			f := newFleet("gpu")
			id := f.existing(cloudprovider.InstanceCreating, now.Add(-tc.created))
			if tc.why != "-" {
				n := f.register(t, id, now.Add(-tc.created), tc.why)
				if tc.once {
					n.Annotations = map[string]string{safety.UsableAnnotation: now.Add(-tc.created / 2).Format(time.RFC3339)}
				}
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

// A provider that names no instances when asked (Cluster API): the
// attempt's instances cannot be told from instances someone else created
// meanwhile (a MachineHealthCheck's replacement), whatever their creation
// times say, so undoing the attempt removes none of them. They are
// released: the one that never registers goes at its own deadline, like
// any instance; the registered ones (idle or busy) stay for scale-down.
func TestGangUndoOfAnUnnamedScaleUp(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	before := f.existing(cloudprovider.InstanceRunning, t0.Add(-time.Hour))
	f.register(t, before, t0.Add(-time.Hour), "")
	attempt := tr.StartGang("team/train", t0)
	ids, err := f.g.IncreaseSize(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	tr.Launched(track.Request{Group: f.g.Id(), Delta: 3, Gang: "team/train", Attempt: attempt}, t0)
	for _, id := range ids {
		f.g.SetCreatedAt(id, t0.Add(time.Second))
	}
	f.register(t, ids[0], t0.Add(time.Minute), "")
	busy := f.register(t, ids[1], t0.Add(time.Minute), "")
	f.run(t, "other-0", busy)

	failures := tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision+time.Millisecond))
	if len(failures) != 1 || failures[0].Reason != track.ReasonGangTimeout || failures[0].Deleted != 0 {
		t.Fatalf("failures = %+v, want one gang timeout removing nothing", failures)
	}
	if got := deleted(f.g); len(got) != 0 {
		t.Fatalf("the undo removed %v: instances it cannot prove are its own", got)
	}
	// The instance that never registered reaches its own deadline.
	failures = tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(maxProvision+2*time.Second))
	if len(failures) != 1 || failures[0].Reason != track.ReasonTimeout {
		t.Fatalf("failures = %+v, want the unregistered instance's timeout", failures)
	}
	if diff := cmp.Diff([]string{ids[2]}, deleted(f.g)); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// Every removal of a registered node asks the safety gate first: while
// the cluster is unhealthy, or when it would take the group below its min
// size, a node that never became usable is released instead (kept, for
// scale-down's rules); an instance that never registered goes whatever
// the gate's pass says.
func TestGiveUpsAskTheGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unsafe  string
		min     int
		removed int // of the registered node and the unregistered instance
		rule    safety.Rule
	}{
		{name: "healthy, above min size", removed: 2},
		{name: "unhealthy", unsafe: "6 of 8 nodes unready", removed: 1, rule: safety.RuleUnhealthy},
		{name: "at min size", min: 2, removed: 1, rule: safety.RuleMinSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFleet("gpu")
			gate := safety.New(safety.Options{}, nil, nil)
			tr := track.New(maxProvision, newBackoff()).WithClient(f.client).WithGate(gate)
			created := t0.Add(-time.Hour)
			stuck := f.existing(cloudprovider.InstanceRunning, created)
			f.register(t, stuck, created, "node is not Ready")
			never := f.existing(cloudprovider.InstanceCreating, created)
			f.g.SetTarget(2)
			info := f.info()
			info.Min = tc.min
			gate.Open(safety.OpenInput{Unsafe: tc.unsafe, Groups: []*nodegroups.Info{info}, Now: t0})
			tr.Update(ctx, []*nodegroups.Info{info}, t0)
			got := deleted(f.g)
			if len(got) != tc.removed || !slices.Contains(got, never) {
				t.Fatalf("removed %v, want %d including the unregistered %s", got, tc.removed, never)
			}
			refused := gate.Refused()
			if tc.rule == "" {
				if len(refused) != 0 {
					t.Fatalf("refusals %+v, want none", refused)
				}
				return
			}
			if len(refused) != 1 || refused[0].Rule != tc.rule || refused[0].Action != safety.ActionGiveUp {
				t.Fatalf("refusals %+v, want one giveUp by %s", refused, tc.rule)
			}
			// Released: a later healthy pass does not judge it again.
			gate.Open(safety.OpenInput{Groups: []*nodegroups.Info{f.info()}, Now: t0.Add(time.Minute)})
			tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(time.Minute))
			if got := deleted(f.g); len(got) != tc.removed {
				t.Errorf("a released node was removed later: %v", got)
			}
		})
	}
}

// The nodes the tracker sees usable are marked so in the API server, once,
// so a process that starts later knows them too.
func TestUsableNodesAreMarked(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFleet("gpu")
	tr := track.New(maxProvision, newBackoff()).WithClient(f.client)
	n := f.register(t, f.existing(cloudprovider.InstanceRunning, t0), t0, "")
	tr.Update(ctx, []*nodegroups.Info{f.info()}, t0.Add(time.Minute))
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := f.client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if since, ok := safety.UsableSince(got); ok {
			if !since.Equal(t0.Add(time.Minute)) {
				t.Errorf("usable since %s, want the pass's time %s", since, t0.Add(time.Minute))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not marked usable: annotations %v", n.Name, got.Annotations)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
