package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/provreq"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// The real Kueue (framework.Kueue) in front of the autoscaler: a Job goes
// to a LocalQueue, Kueue reserves quota, creates a ProvisioningRequest per
// its admission check, and admits the Job once the autoscaler says
// Provisioned. See docs/kueue.md.

// check-capacity with capacity in place: the Job is admitted on the
// existing node, its pods consume the request, no node is added.
func TestKueueCheckCapacity(t *testing.T) {
	s := newKueueScenario(t)
	g := s.cpuGroup("cpu", 3)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	node := s.staticNode(t, "n1", "8", "", 0)
	log := s.watchRequests(t)
	queue, check := s.queue(t, queueOpts{class: v1.ProvisioningClassCheckCapacity})
	s.job(t, "train", queue, 2, s.pod("x").CPU("3").Obj())
	w := s.waitWorkload(t, "train", "admitted", time.Minute, func(w workload) bool { return w.is("Admitted") })
	pr := requestName(w.name, check, 1)
	wantReason(t, log.waitHad(t, s.ctx, pr, v1.Provisioned, time.Second), provreq.ReasonCapacityIsFound, "")
	for _, p := range s.waitJobBound(t, "train", 2, time.Minute) {
		if p.Spec.NodeName != node || !consumes(&p, pr, v1.ProvisioningClassCheckCapacity) {
			t.Errorf("pod %s on %q with annotations %v, want it on %s consuming %s", p.Name, p.Spec.NodeName, p.Annotations, node, pr)
		}
	}
	s.noGroupNodes(t, g.Name, 3*time.Second)
}

// best-effort-atomic-scale-up: 3 pods of 3 CPUs on 4-CPU nodes are exactly
// 3 new nodes, requested at once (+3); Kueue admits the Job, its pods bind
// to those nodes and nothing more is added.
func TestKueueBestEffortAtomic(t *testing.T) {
	s := newKueueScenario(t)
	g := s.cpuGroup("cpu", 6)
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	log := s.watchRequests(t)
	queue, check := s.queue(t, queueOpts{class: v1.ProvisioningClassBestEffortAtomicScaleUp})
	s.job(t, "train", queue, 3, s.pod("x").CPU("3").Obj())
	w := s.waitWorkload(t, "train", "admitted", 2*time.Minute, func(w workload) bool { return w.is("Admitted") })
	pr := requestName(w.name, check, 1)
	wantReason(t, log.waitHad(t, s.ctx, pr, v1.Provisioned, time.Second), provreq.ReasonCapacityIsProvisioned, g.Name+" +3")
	// Every pod on a node of the group. Not necessarily one per node:
	// kwok completes a Job's pod as soon as it runs, so a pod bound later
	// may take the node of one that finished.
	for _, p := range s.waitJobBound(t, "train", 3, 2*time.Minute) {
		if !strings.HasPrefix(p.Spec.NodeName, g.Name+"-") || !consumes(&p, pr, v1.ProvisioningClassBestEffortAtomicScaleUp) {
			t.Errorf("pod %s on %q with annotations %v, want it on a node of %s consuming %s", p.Name, p.Spec.NodeName, p.Annotations, g.Name, pr)
		}
	}
	framework.Consistently(s.ctx, t, 4*time.Second, "exactly 3 nodes", func(ctx context.Context) (bool, string, error) {
		got, err := s.groupNodes(ctx, g.Name)
		return err == nil && len(got) == 3, fmt.Sprintf("%d nodes", len(got)), err
	})
	m, _ := a.Metrics(s.ctx)
	if !strings.Contains(m, fmt.Sprintf(`cluster_autoscaler_scaled_up_nodes_total{node_group=%q} 3`, g.Name)) {
		t.Error("scaled_up_nodes_total is not 3")
	}
}

// kueueGPUDriver publishes the GPUs of framework.KueueGPUClass.
const kueueGPUDriver = "gpu.kueue-e2e.example.com"

// check-capacity for pods whose GPUs come from a ResourceClaimTemplate:
// the capacity is found on the node that has the devices (upstream's
// autoscaler answers "no capacity" here, kubernetes/autoscaler #10065), and
// Kueue, counting the DeviceClass as quota, admits the Job onto it.
func TestKueueDRACheckCapacity(t *testing.T) {
	s := newKueueScenario(t)
	s.c.Create(s.ctx, t, builder.DeviceClass(framework.KueueGPUClass).Driver(kueueGPUDriver).Obj())
	g := s.gpuGroup("gpu", 2, 2)
	g.Template.Drivers = []kwok.DriverConfig{{Driver: kueueGPUDriver, Devices: g.Template.Drivers[0].Devices}}
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	node := s.staticNode(t, "n1", "16", kueueGPUDriver, 2)
	s.c.Create(s.ctx, t, builder.ClaimTemplate(s.ns, "kgpu").Request(builder.Request("gpu", framework.KueueGPUClass)).Obj())
	log := s.watchRequests(t)
	allocations := s.watchAllocations(t)
	queue, check := s.queue(t, queueOpts{class: v1.ProvisioningClassCheckCapacity, gpus: 4})
	s.job(t, "train", queue, 2, s.pod("x").CPU("1").ClaimFromTemplate("gpu", "kgpu").Obj())
	w := s.waitWorkload(t, "train", "admitted", time.Minute, func(w workload) bool { return w.is("Admitted") })
	pr := requestName(w.name, check, 1)
	wantReason(t, log.waitHad(t, s.ctx, pr, v1.Provisioned, time.Second), provreq.ReasonCapacityIsFound, "")
	for _, p := range s.waitJobBound(t, "train", 2, time.Minute) {
		if p.Spec.NodeName != node || !consumes(&p, pr, v1.ProvisioningClassCheckCapacity) {
			t.Errorf("pod %s on %q with annotations %v, want it on %s consuming %s", p.Name, p.Spec.NodeName, p.Annotations, node, pr)
		}
	}
	// Each pod's claim got a GPU of the node. Not necessarily two
	// different ones: kwok completes a Job's pod as soon as it runs, and
	// the second pod may get the GPU the first one's claim gave back.
	framework.Eventually(s.ctx, t, 10*time.Second, "two claims on GPUs of "+node, func(context.Context) (bool, string, error) {
		got := allocations()
		onNode := 0
		for _, devs := range got {
			if slices.ContainsFunc(devs, func(d string) bool { return strings.HasPrefix(d, kueueGPUDriver+"/"+node+"/") }) {
				onNode++
			}
		}
		return len(got) == 2 && onNode == 2, fmt.Sprint(got), nil
	})
	s.noGroupNodes(t, g.Name, 3*time.Second)
}

// Failed, as Kueue retries it: a request larger than
// --max-pods-per-provisioning-request is Failed (TooManyPods); Kueue
// retries once (backoffLimitCount 1) with attempt 2, which fails too, then
// rejects the check and deactivates the Workload, saying why. A request that does not
// fit is not Failed: it stays Provisioned=False, Kueue keeps the check
// Pending with the autoscaler's reason and makes no second attempt.
func TestKueueFailedRetries(t *testing.T) {
	s := newKueueScenario(t)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{s.cpuGroup("cpu", 2)}},
		"--max-pods-per-provisioning-request=2")
	s.staticNode(t, "n1", "16", "", 0)
	log := s.watchRequests(t)
	queue, check := s.queue(t, queueOpts{class: v1.ProvisioningClassCheckCapacity, retries: 1})
	s.job(t, "big", queue, 3, s.pod("x").CPU("1").Obj())
	s.job(t, "huge", queue, 1, s.pod("x").CPU("100").Obj())

	// Rejected is brief: Kueue deactivates the Workload at once and resets
	// the check to Pending; the deactivation stays, and says why.
	w := s.waitWorkload(t, "big", "deactivated by "+check, 2*time.Minute, func(w workload) bool {
		c := apimeta.FindStatusCondition(w.conditions, "Evicted")
		return !w.active && c != nil && c.Reason == "DeactivatedDueToAdmissionCheck"
	})
	for attempt := 1; attempt <= 2; attempt++ {
		c, ok := log.had(requestName(w.name, check, attempt), v1.Failed)
		if !ok {
			t.Errorf("attempt %d was never Failed: %s", attempt, log)
			continue
		}
		wantReason(t, c, provreq.ReasonTooManyPods, "3")
	}
	if third := requestName(w.name, check, 3); slices.Contains(log.names(), third) {
		t.Errorf("Kueue made a third attempt %s with backoffLimitCount 1: %s", third, log)
	}
	if c := apimeta.FindStatusCondition(w.conditions, "Evicted"); !strings.Contains(c.Message, "Rejected") || !strings.Contains(c.Message, check) || !strings.Contains(c.Message, "--max-pods-per-provisioning-request") {
		t.Errorf("the Workload was deactivated with %q, want it to name the rejected check and the autoscaler's reason", c.Message)
	}
	if pods, err := s.jobPods(s.ctx, "big"); err != nil || len(pods) != 0 {
		t.Errorf("Job big has %d pods (%v), want none: it was never admitted", len(pods), err)
	}

	h := s.waitWorkload(t, "huge", "pending on the autoscaler's reason", time.Minute, func(w workload) bool {
		return w.checks[check].State == "Pending" && strings.Contains(w.checks[check].Message, "0 of 1 pod(s) fit")
	})
	first := requestName(h.name, check, 1)
	if c, ok := log.had(first, v1.Failed); ok {
		t.Errorf("%s Failed (%s), want it only not provisioned", first, c.Reason)
	}
	framework.Consistently(s.ctx, t, 3*time.Second, "no second attempt for "+h.name, func(context.Context) (bool, string, error) {
		return !slices.Contains(log.names(), requestName(h.name, check, 2)), log.String(), nil
	})
}

// BookingExpired, as Kueue retries it: with a second admission check (the
// test's own) still pending, the Workload is not admitted while the
// request is Provisioned; the booking (8s here) expires, Kueue retries with
// attempt 2, the test approves its check, and the Job is admitted on the
// capacity attempt 2 booked.
func TestKueueBookingExpired(t *testing.T) {
	s := newKueueScenario(t)
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{s.cpuGroup("cpu", 2)}},
		"--provisioning-request-booking-duration=8s")
	node := s.staticNode(t, "n1", "8", "", 0)
	manual := s.manualCheck(t)
	log := s.watchRequests(t)
	queue, check := s.queue(t, queueOpts{class: v1.ProvisioningClassCheckCapacity, retries: 1, extraChecks: []string{manual}})
	s.job(t, "late", queue, 1, s.pod("x").CPU("2").Obj())

	w := s.waitWorkload(t, "late", "waiting for its second check", time.Minute, func(w workload) bool {
		return w.checks[check].State == "Ready" && w.checks[manual].State == "Pending"
	})
	first, second := requestName(w.name, check, 1), requestName(w.name, check, 2)
	wantReason(t, log.waitHad(t, s.ctx, first, v1.BookingExpired, 30*time.Second),
		provreq.ReasonCapacityReservationTimeExpired, provreq.MessageCapacityReservationExpired)
	framework.Eventually(s.ctx, t, 30*time.Second, "Kueue's attempt 2 "+second, func(context.Context) (bool, string, error) {
		return slices.Contains(log.names(), second), log.String(), nil
	})
	if w := s.waitWorkload(t, "late", "retried once", 10*time.Second, func(w workload) bool { return w.checks[check].RetryCount == 1 }); w.is("Admitted") {
		t.Errorf("admitted before its second check: %s", w)
	}
	s.approve(t, "late", manual)
	s.waitWorkload(t, "late", "admitted", time.Minute, func(w workload) bool { return w.is("Admitted") })
	wantReason(t, log.waitHad(t, s.ctx, second, v1.Provisioned, time.Second), provreq.ReasonCapacityIsFound, "")
	for _, p := range s.waitJobBound(t, "late", 1, time.Minute) {
		if p.Spec.NodeName != node || !consumes(&p, second, v1.ProvisioningClassCheckCapacity) {
			t.Errorf("pod %s on %q with annotations %v, want it on %s consuming %s", p.Name, p.Spec.NodeName, p.Annotations, node, second)
		}
	}
}
