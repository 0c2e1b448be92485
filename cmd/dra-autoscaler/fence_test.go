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
	var takenOver atomic.Bool
	client.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !takenOver.Load() {
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
	other, later := "other-replica", metav1.NewMicroTime(time.Now().Add(time.Hour))
	lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: lease.Spec.LeaseDurationSeconds, AcquireTime: &later, RenewTime: &later}
	if _, err := client.CoordinationV1().Leases("kube-system").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	takenOver.Store(true)
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
