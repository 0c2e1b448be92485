package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
)

// On shutdown the leader stops acting before it gives the lease up: the
// lease still names it while its work winds down, and is released only
// after fn has returned.
func TestLeaderElectReleasesAfterTheLoopStopped(t *testing.T) {
	opts, err := config.Parse([]string{"--leader-elect-resource-namespace=kube-system", "--leader-elect-resource-name=autoscaler",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=100ms"})
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	holder := func() string {
		l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "autoscaler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var heldWhileStopping atomic.Bool
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- leaderElect(ctx, opts, client, record.NewFakeRecorder(100), newLeaseFence(true, opts.LeaderElection.RenewDeadline.Duration), func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			// A pass or a drain winding down: the lease must still be ours.
			time.Sleep(300 * time.Millisecond)
			heldWhileStopping.Store(holder() != "")
			return nil
		})
	}()
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("never became leader")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("leaderElect: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("leaderElect did not return after the loop stopped")
	}
	if !heldWhileStopping.Load() {
		t.Error("the lease was given up while the loop was still stopping")
	}
	if h := holder(); h != "" {
		t.Errorf("lease still held by %q after shutdown", h)
	}
}
