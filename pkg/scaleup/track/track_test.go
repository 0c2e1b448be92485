package track_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/fakeprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/track"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

const maxProvision = 15 * time.Minute

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newBackoff() *backoff.Backoff { return backoff.New(5*time.Minute, 30*time.Minute, 3*time.Hour) }

// registered returns a Ready node for each providerID.
func registered(ids ...string) []*corev1.Node {
	var out []*corev1.Node
	for _, id := range ids {
		n := builder.Node(id).Obj()
		n.Spec.ProviderID = id
		out = append(out, n)
	}
	return out
}

// info is the loop's view of g with the given nodes registered.
func info(g *fakeprovider.FakeNodeGroup, ready ...*corev1.Node) []*nodegroups.Info {
	return []*nodegroups.Info{{Group: g, Id: g.Id(), Max: g.MaxSize(), Target: g.Target(), Ready: ready}}
}

func TestRequestsFulfilledOldestFirst(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	b := newBackoff()
	// An old failure, long over: a completed scale-up forgives it.
	b.Fail("gpu", track.ReasonTimeout, t0.Add(-time.Hour))
	tr := track.New(maxProvision, b)
	g := fakeprovider.NewGroup("gpu", 0, 10)
	if _, err := g.IncreaseSize(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	tr.Requested("gpu", 2, t0)
	if _, err := g.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	tr.Requested("gpu", 3, t0.Add(time.Minute))
	tr.Requested("gpu", 0, t0.Add(time.Minute)) // nothing asked, nothing tracked
	instances, _ := g.Nodes()
	ids := make([]string, len(instances))
	for i, in := range instances {
		ids[i] = in.Id
	}

	steps := []struct {
		name       string
		registered int
		at         time.Time
		want       []track.Request
	}{
		{"none registered", 0, t0.Add(2 * time.Minute), []track.Request{
			{Group: "gpu", Delta: 2, Time: t0, ExpectedBy: t0.Add(maxProvision)},
			{Group: "gpu", Delta: 3, Time: t0.Add(time.Minute), ExpectedBy: t0.Add(time.Minute + maxProvision)},
		}},
		{"three registered: the oldest done, the next one partly", 3, t0.Add(3 * time.Minute), []track.Request{
			{Group: "gpu", Delta: 2, Time: t0.Add(time.Minute), ExpectedBy: t0.Add(time.Minute + maxProvision)},
		}},
		{"all registered", 5, t0.Add(4 * time.Minute), nil},
	}
	for _, s := range steps {
		if f := tr.Update(ctx, info(g, registered(ids[:s.registered]...)...), s.at); len(f) != 0 {
			t.Fatalf("%s: failures %+v", s.name, f)
		}
		if diff := cmp.Diff(s.want, tr.InFlight()); diff != "" {
			t.Errorf("%s: in flight (-want +got):\n%s", s.name, diff)
		}
	}
	if st, _ := b.Get("gpu", t0.Add(4*time.Minute)); st.Failures != 0 {
		t.Errorf("backoff after a complete scale-up = %+v, want forgotten", st)
	}
}

func TestInFlightOrder(t *testing.T) {
	tr := track.New(maxProvision, newBackoff())
	tr.Requested("b", 1, t0.Add(time.Minute))
	tr.Requested("b", 1, t0)
	tr.Requested("a", 1, t0)
	var got []string
	for _, r := range tr.InFlight() {
		got = append(got, r.Group+"@"+r.Time.Sub(t0).String())
	}
	if diff := cmp.Diff([]string{"a@0s", "b@0s", "b@1m0s"}, got); diff != "" {
		t.Errorf("InFlight order (-want +got):\n%s", diff)
	}
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		name string
		// listed is how many of the 2 requested instances the provider
		// lists; the rest exist only as target size.
		listed     int
		wantCalls  []fakeprovider.Call
		wantDelete int
	}{
		{"unregistered instances are force-deleted", 2,
			[]fakeprovider.Call{{Method: "ForceDeleteNodes", Nodes: []string{"fake://gpu/1", "fake://gpu/2"}}}, 2},
		{"target not yet backed by instances is given up", 1,
			[]fakeprovider.Call{{Method: "ForceDeleteNodes", Nodes: []string{"fake://gpu/1"}}, {Method: "DecreaseTargetSize", Delta: -1}}, 1},
		{"no instance at all", 0,
			[]fakeprovider.Call{{Method: "DecreaseTargetSize", Delta: -2}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			b := newBackoff()
			tr := track.New(maxProvision, b)
			g := fakeprovider.NewGroup("gpu", 1, 10)
			running := g.AddInstance(cloudprovider.InstanceRunning, nil)
			for range tc.listed {
				g.AddInstance(cloudprovider.InstanceCreating, nil)
			}
			g.SetTarget(3)
			tr.Requested("gpu", 2, t0)
			node := registered(running)

			// Up to the deadline, nothing happens.
			if f := tr.Update(ctx, info(g, node...), t0.Add(maxProvision)); len(f) != 0 {
				t.Fatalf("failures at the deadline: %+v", f)
			}
			if len(g.Calls()) != 0 {
				t.Fatalf("calls before the deadline: %+v", g.Calls())
			}
			now := t0.Add(maxProvision + time.Second)
			f := tr.Update(ctx, info(g, node...), now)
			if len(f) != 1 || f[0].Group != "gpu" || f[0].Reason != track.ReasonTimeout || f[0].Deleted != tc.wantDelete {
				t.Fatalf("failures = %+v, want one timeout of gpu deleting %d", f, tc.wantDelete)
			}
			if diff := cmp.Diff(tc.wantCalls, g.Calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			if got := g.Target(); got != 1 {
				t.Errorf("target = %d, want 1 (the registered node)", got)
			}
			if st, off := b.Get("gpu", now); !off || st.Reason != track.ReasonTimeout || st.Failures != 1 {
				t.Errorf("backoff = %+v (active %v), want one timeout failure", st, off)
			}
			if r := tr.InFlight(); len(r) != 0 {
				t.Errorf("still in flight: %+v", r)
			}
		})
	}
}

func TestFailedInstances(t *testing.T) {
	outOfStock := &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: "STOCKOUT", ErrorMessage: "no H100 in zone a"}
	quota := &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: "QUOTA", ErrorMessage: "quota exceeded"}
	tests := []struct {
		name string
		errs []*cloudprovider.InstanceErrorInfo
		// backedOff: the actuator already backed the group off for this
		// scale-up.
		backedOff    bool
		wantFailure  *track.Failure
		wantFailures int // backoff failure count afterwards
	}{
		{"out of resources", []*cloudprovider.InstanceErrorInfo{outOfStock}, false,
			&track.Failure{Group: "gpu", Reason: track.ReasonOutOfResources, Deleted: 1, Nodes: []string{"fake://gpu/0"}, Message: "1 instance(s) failed to start: no H100 in zone a"}, 1},
		{"other errors; the first one is the reason", []*cloudprovider.InstanceErrorInfo{quota, outOfStock}, false,
			&track.Failure{Group: "gpu", Reason: track.ReasonCloudProvider, Deleted: 2, Nodes: []string{"fake://gpu/0", "fake://gpu/1"}, Message: "2 instance(s) failed to start: quota exceeded"}, 1},
		{"already backed off: cleaned up, not counted twice", []*cloudprovider.InstanceErrorInfo{quota}, true, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			b := newBackoff()
			tr := track.New(maxProvision, b)
			g := fakeprovider.NewGroup("gpu", 0, 10)
			var failed []string
			for _, e := range tc.errs {
				failed = append(failed, g.AddInstance(cloudprovider.InstanceCreating, e))
			}
			g.SetTarget(len(tc.errs))
			now := t0.Add(time.Minute) // long before the provision timeout
			tr.Requested("gpu", len(tc.errs), t0)
			if tc.backedOff {
				b.Fail("gpu", track.ReasonCloudProvider, t0)
			}

			var want []track.Failure
			if tc.wantFailure != nil {
				want = []track.Failure{*tc.wantFailure}
			}
			if diff := cmp.Diff(want, tr.Update(ctx, info(g), now)); diff != "" {
				t.Errorf("failures (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]fakeprovider.Call{{Method: "ForceDeleteNodes", Nodes: failed}}, g.Calls()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			st, off := b.Get("gpu", now)
			if !off || st.Failures != tc.wantFailures {
				t.Errorf("backoff = %+v (active %v), want %d failure(s)", st, off, tc.wantFailures)
			}
			if tc.wantFailure != nil && st.Reason != tc.wantFailure.Reason {
				t.Errorf("backoff reason = %q, want %q", st.Reason, tc.wantFailure.Reason)
			}
			// The requests stay until the next pass sees the group without
			// the failed instances; then nothing is in flight any more.
			if got := g.Target(); got != 0 {
				t.Errorf("target = %d, want 0", got)
			}
			if f := tr.Update(ctx, info(g), now.Add(time.Second)); len(f) != 0 {
				t.Errorf("second pass failures: %+v", f)
			}
			if r := tr.InFlight(); len(r) != 0 {
				t.Errorf("still in flight: %+v", r)
			}
		})
	}
}

// When only some instances of a request fail, the healthy ones stay in
// flight, guarded by the provision timeout.
func TestFailedInstancesKeepHealthyOnes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	b := newBackoff()
	tr := track.New(maxProvision, b)
	g := fakeprovider.NewGroup("gpu", 0, 10)
	g.AddInstance(cloudprovider.InstanceCreating, &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorMessage: "boom"})
	g.AddInstance(cloudprovider.InstanceCreating, nil)
	g.SetTarget(2)
	tr.Requested("gpu", 2, t0)
	tr.Update(ctx, info(g), t0.Add(time.Minute))
	tr.Update(ctx, info(g), t0.Add(2*time.Minute))
	if r := tr.InFlight(); len(r) != 1 || r[0].Delta != 1 {
		t.Fatalf("in flight %+v, want the one healthy instance", r)
	}
	failures := tr.Update(ctx, info(g), t0.Add(maxProvision+time.Minute))
	if len(failures) != 1 || failures[0].Reason != track.ReasonTimeout {
		t.Fatalf("failures after the deadline: %+v, want a timeout of the healthy-but-stuck instance", failures)
	}
}

// A request carries its group's own max node provision time: past the
// flag's deadline it waits on, and times out at its own, saying so.
func TestGroupProvisionTime(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	tr := track.New(maxProvision, newBackoff())
	g := fakeprovider.NewGroup("gpu", 0, 10)
	g.AddInstance(cloudprovider.InstanceCreating, nil)
	g.SetTarget(1)
	own := 4 * maxProvision
	tr.Launched(track.Request{Group: "gpu", Delta: 1, MaxProvision: own}, t0)
	if r := tr.InFlight(); len(r) != 1 || !r[0].ExpectedBy.Equal(t0.Add(own)) {
		t.Fatalf("in flight %+v, want one expected by %v", r, t0.Add(own))
	}
	if f := tr.Update(ctx, info(g), t0.Add(maxProvision+time.Second)); len(f) != 0 {
		t.Fatalf("timed out at the flag's deadline: %+v", f)
	}
	f := tr.Update(ctx, info(g), t0.Add(own+time.Second))
	if len(f) != 1 || f[0].Reason != track.ReasonTimeout || !strings.Contains(f[0].Message, "within "+own.String()) {
		t.Fatalf("failures %+v, want a timeout within %s", f, own)
	}
}
