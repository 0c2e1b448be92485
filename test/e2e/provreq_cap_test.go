package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// A tenant's ProvisioningRequest for 1,000,000 GPU pods, beside ordinary
// pending pods: the autoscaler stays up with its memory bounded (the
// request is refused before any of its pods is built), the request is
// Failed with the cap named in its condition and a Warning event, no GPU
// node is added for it, and the ordinary pods still get their nodes.
func TestProvReqTooManyPods(t *testing.T) {
	const count = 1_000_000
	s := newProvScenario(t)
	gpu, cpu := s.gpuGroup("gpu2", 8, 2), s.cpuGroup("cpu4", 4)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{gpu, cpu}})
	name := s.kueueRequest(t, "flood", v1.ProvisioningClassBestEffortAtomicScaleUp, count, true)
	for i := range 3 {
		s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("web-%d", i)).CPU("3").Obj())
	}

	c := s.waitCondition(t, name, v1.Failed, metav1.ConditionTrue, 2*time.Minute)
	limit := fmt.Sprint(config.DefaultMaxPodsPerProvisioningRequest)
	wantReason(t, c, provreq.ReasonTooManyPods, fmt.Sprintf("asks for %d pods, more than the %s", count, limit))
	if !strings.Contains(c.Message, "--max-pods-per-provisioning-request") {
		t.Errorf("Failed message %q does not name the flag", c.Message)
	}
	framework.Eventually(s.ctx, t, 30*time.Second, "a Warning TooManyPods event on the request", func(ctx context.Context) (bool, string, error) {
		msgs, err := s.events(ctx, name, provreq.ReasonTooManyPods)
		return len(msgs) > 0 && strings.Contains(msgs[0], limit), fmt.Sprintf("%q", msgs), err
	})
	framework.Eventually(s.ctx, t, 2*time.Minute, "the 3 ordinary pods bound to new nodes", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 3, seen, err
	})
	framework.Consistently(s.ctx, t, 5*time.Second, "no GPU node for the request, the autoscaler up", func(ctx context.Context) (bool, string, error) {
		nodes, err := s.groupNodes(ctx, gpu.Name)
		return err == nil && len(nodes) == 0 && !a.Exited(), fmt.Sprintf("%d GPU nodes, exited %v", len(nodes), a.Exited()), err
	})
	if m, err := a.Metrics(s.ctx); err != nil || !strings.Contains(m, "cluster_autoscaler_") {
		t.Errorf("/metrics not served after the request (%v)", err)
	}
	peak, err := a.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dra-autoscaler peak RSS (VmHWM) with a %d-pod ProvisioningRequest: %d MiB", count, peak>>20)
	// A million pods built would take gigabytes; the autoscaler's own
	// working set is a few hundred megabytes at most here.
	if peak > 1<<30 {
		t.Errorf("peak RSS %d MiB: the request's pods were built", peak>>20)
	}
	if strings.Contains(a.Log(), "panic") {
		t.Errorf("the autoscaler panicked:\n%s", grepLines(a.Log(), "panic"))
	}
}
