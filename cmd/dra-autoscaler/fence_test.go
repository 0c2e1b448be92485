package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// The fence holds while this process renews the lease, and drops within
// the renew deadline once it cannot: here another replica took the lease
// over (as after this one was frozen longer than the lease), and this one
// still runs.
func TestLeaseFenceDropsWhenTheLeaseIsLost(t *testing.T) {
	opts, err := config.Parse([]string{"--leader-elect-resource-namespace=kube-system", "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=100ms"})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	// Once another replica took the lease over, this replica's writes of
	// it conflict, as the API server's resourceVersion check makes them
	// (the fake does not). Installed before anything runs: reactors are
	// not safe to add while the fake is in use.
	// The other replica's own write passes: from the takeover on, this
	// replica cannot write its name back in between.
	var takenOver atomic.Bool
	other := "other-replica"
	client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !takenOver.Load() {
			return false, nil, nil
		}
		if l, ok := a.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == other {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "autoscaler", errors.New("the object has been modified"))
	})
	fence := newLeaseFence(true, opts.LeaderElection.RenewDeadline.Duration)
	if fence.Held() {
		t.Fatal("held before any lease was written")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- leaderElect(ctx, opts, client, record.NewFakeRecorder(100), fence, func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("never became leader")
	}
	if !fence.Held() {
		t.Fatal("not held while leading")
	}
	// Another replica writes the lease as its own, far into the future.
	lease, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "autoscaler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	later := metav1.NewMicroTime(time.Now().Add(time.Hour))
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: lease.Spec.LeaseDurationSeconds, AcquireTime: &later, RenewTime: &later}
	takenOver.Store(true)
	if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fence.Held() {
		if time.Now().After(deadline) {
			t.Fatal("still held 10s after another replica took the lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("leaderElect did not return after losing the lease")
	}
}

// Behind the fence, reads pass and writes are refused while the lease is
// not held.
func TestLeaseFenceTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	fence := newLeaseFence(true, time.Minute)
	rt := fence.wrap(http.DefaultTransport)
	do := func(method string) error {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/nodes/n1", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(http.MethodGet); err != nil {
		t.Errorf("GET while not held: %v", err)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(m); err == nil || !strings.Contains(err.Error(), "does not hold the leader lease") {
			t.Errorf("%s while not held: %v, want refused", m, err)
		}
	}
	fence.renewed.Store(time.Now().UnixNano())
	if err := do(http.MethodPatch); err != nil {
		t.Errorf("PATCH while held: %v", err)
	}
	if !newLeaseFence(false, 0).Held() {
		t.Error("without leader election the fence must always hold")
	}
}

// stubLock is a lease held by holder; it counts the writes that reach it.
type stubLock struct {
	holder string
	writes int
}

func (l *stubLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: l.holder}, nil, nil
}
func (l *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	l.writes++
	return nil
}
func (l *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	l.writes++
	return nil
}
func (l *stubLock) RecordEvent(string) {}
func (l *stubLock) Identity() string   { return "me" }
func (l *stubLock) Describe() string   { return "stub" }

// A release (an empty holder, client-go's ReleaseOnCancel) is written only
// over a lease this replica held when it last read it: never over another
// replica's, which client-go would otherwise retry without end on a
// conflict. Renewals pass.
func TestLeaseReleaseOnlyOfOurOwn(t *testing.T) {
	for _, tc := range []struct {
		name, holder string
		record       resourcelock.LeaderElectionRecord
		refused      bool
	}{
		{name: "release of our own", holder: "me"},
		{name: "release of a lease nobody holds", holder: ""},
		{name: "release of another replica's", holder: "other", refused: true},
		{name: "renewal", holder: "me", record: resourcelock.LeaderElectionRecord{HolderIdentity: "me"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubLock{holder: tc.holder}
			lock := newLeaseFence(true, time.Minute).lock(stub)
			if _, _, err := lock.Get(context.Background()); err != nil {
				t.Fatal(err)
			}
			err := lock.Update(context.Background(), tc.record)
			if refused := errors.Is(err, errNotReleasing); refused != tc.refused || (err != nil && !refused) {
				t.Fatalf("Update: %v, want refused %v", err, tc.refused)
			}
			if apierrors.IsConflict(err) {
				t.Error("a refusal must not be a conflict: client-go retries those")
			}
			if want := map[bool]int{true: 0, false: 1}[tc.refused]; stub.writes != want {
				t.Errorf("%d writes reached the lease, want %d", stub.writes, want)
			}
		})
	}
}
