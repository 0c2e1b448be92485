package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/buffers"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// One-shot buffers (spec.refillStrategy none, the open proposal
// kubernetes/autoscaler#10108). Serial, as the other buffer tests.

// consumed says the buffer's status.consumedReplicas is n.
func consumed(n int32) func(*v1beta1.CapacityBuffer) bool {
	return func(b *v1beta1.CapacityBuffer) bool { return ptr.Deref(b.Status.ConsumedReplicas, -1) == n }
}

// A gang's capacity held ahead: a one-shot buffer of 4 chunks of 3 CPUs
// holds 4 four-CPU nodes (one chunk each). The gang, 3 workers of 4
// CPUs, binds one worker per node; consumedReplicas rises 1, 2, 4 (12
// CPUs are 4 chunks) with no node added, the buffer is Fulfilled, and the
// one node no worker took is removed by scale-down; no refill follows.
func TestCapacityBufferOneShotGang(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 8)
	s.labelledTemplate(t, s.ns, "gang-chunk", map[string]string{"job": "train"}) // 3 CPUs
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: gang}
spec:
  refillStrategy: none
  podTemplateRef: {name: gang-chunk}
  replicas: 4`)
	s.waitNodes(t, g, 4, time.Minute)
	s.waitBuffer(t, "gang", "4 chunks held, none consumed", time.Minute, func(b *v1beta1.CapacityBuffer) bool {
		return holding(4, buffers.ReasonFitsExisting)(b) && consumed(0)(b)
	})
	s.stayNodes(t, g, 4, 4*time.Second)

	// The workers arrive one at a time (a scheduler binding them in turn);
	// each takes a whole node the buffer held.
	for i, want := range []int32{1, 2, 4} {
		name := fmt.Sprintf("worker-%d", i)
		s.c.Create(s.ctx, t, s.pod(name).CPU("4").Label("job", "train").Obj())
		s.waitOnGroup(t, name, g.Name)
		s.waitBuffer(t, "gang", fmt.Sprintf("consumedReplicas %d", want), time.Minute, consumed(want))
		if want < 4 {
			s.stayNodes(t, g, 4, 3*time.Second)
		}
	}
	b := s.waitBuffer(t, "gang", "Fulfilled", time.Minute, condition(v1beta1.ConditionFulfilled, metav1.ConditionTrue, buffers.ReasonBufferFilled))
	if !condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonBufferFilled)(b) || ptr.Deref(b.Status.Replicas, -1) != 4 {
		t.Errorf("a Fulfilled buffer's status %+v: want Provisioning=False/BufferFilled, replicas 4", b.Status)
	}
	if condition(v1beta1.ConditionExpired, "", "")(b) {
		t.Errorf("a Fulfilled buffer is also Expired: %+v", b.Status.Conditions)
	}

	// The spare node goes; the workers' nodes stay, nothing refills.
	s.waitNodes(t, g, 3, time.Minute)
	s.stayNodes(t, g, 3, 6*time.Second)
	framework.Eventually(s.ctx, t, time.Minute, "the 3 workers still bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == 3, seen, err
	})
	s.waitBuffer(t, "gang", "still Fulfilled, consumedReplicas 4", 10*time.Second, func(b *v1beta1.CapacityBuffer) bool {
		return consumed(4)(b) && condition(v1beta1.ConditionFulfilled, metav1.ConditionTrue, buffers.ReasonBufferFilled)(b)
	})
	if msgs, err := eventMessages(s.ctx, s.c, s.ns, "gang", buffers.ReasonBufferFilled); err != nil || len(msgs) == 0 {
		t.Errorf("no BufferFilled event on the buffer (%v)", err)
	}
}

// A one-shot buffer nothing fills: its nodes come, the deadline passes,
// it is Expired (FillDeadlineExceeded) and holds nothing, so scale-down
// takes its nodes back.
func TestCapacityBufferOneShotFillDeadline(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 4)
	s.labelledTemplate(t, s.ns, "chunk", map[string]string{"job": "never"}) // 3 CPUs
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, fastScaleDown...)
	start := time.Now()
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: short}
spec:
  refillStrategy: none
  fillDeadlineSeconds: 20
  podTemplateRef: {name: chunk}
  replicas: 2`)
	s.waitNodes(t, g, 2, time.Minute)
	s.waitBuffer(t, "short", "2 chunks held", time.Minute, holding(2, buffers.ReasonFitsExisting))
	b := s.waitBuffer(t, "short", "Expired", time.Minute, condition(v1beta1.ConditionExpired, metav1.ConditionTrue, buffers.ReasonDeadlineExceed))
	if d := time.Since(start); d < 19*time.Second {
		t.Errorf("Expired %s after creation, before the 20 s deadline", d.Round(time.Second))
	}
	if !condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonDeadlineExceed)(b) || ptr.Deref(b.Status.Replicas, -1) != 0 ||
		condition(v1beta1.ConditionFulfilled, "", "")(b) {
		t.Errorf("an Expired buffer's status %+v: want Provisioning=False/FillDeadlineExceeded, replicas 0, no Fulfilled", b.Status)
	}
	s.waitNodes(t, g, 0, time.Minute)
	s.stayNodes(t, g, 0, 4*time.Second)
}

// A buffer that says refillStrategy recreate (the default) refills: the
// pod that takes its room is not counted, a second node comes.
func TestCapacityBufferOneShotRecreateRefills(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 4)
	s.labelledTemplate(t, s.ns, "chunk", map[string]string{"job": "serve"}) // 3 CPUs
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: warm}
spec:
  refillStrategy: recreate
  podTemplateRef: {name: chunk}
  replicas: 1`)
	s.waitNodes(t, g, 1, time.Minute)
	s.waitBuffer(t, "warm", "1 chunk held", time.Minute, holding(1, buffers.ReasonFitsExisting))
	s.c.Create(s.ctx, t, s.pod("real").CPU("3").Label("job", "serve").Obj())
	s.waitOnGroup(t, "real", g.Name)
	s.waitNodes(t, g, 2, time.Minute)
	b := s.waitBuffer(t, "warm", "refilled", time.Minute, holding(1, buffers.ReasonFitsExisting))
	if b.Status.ConsumedReplicas != nil || condition(v1beta1.ConditionFulfilled, "", "")(b) {
		t.Errorf("a recreate buffer's status %+v counts consumption", b.Status)
	}
	s.stayNodes(t, g, 2, 3*time.Second)
}

// Bad input never holds capacity: the CRD refuses an unknown strategy and
// a deadline below 1; a one-shot buffer with limits (out of the
// proposal's scope) is ReadyForProvisioning=False/InvalidSpec.
func TestCapacityBufferOneShotBadInput(t *testing.T) {
	s := newBufferScenario(t)
	g := s.cpuGroup("cpu4", 2)
	s.labelledTemplate(t, s.ns, "chunk", map[string]string{"job": "x"})
	for _, tc := range []struct{ spec, want string }{
		{`{refillStrategy: sometimes, podTemplateRef: {name: chunk}, replicas: 1}`, "spec.refillStrategy"},
		{`{refillStrategy: none, fillDeadlineSeconds: -5, podTemplateRef: {name: chunk}, replicas: 1}`, "spec.fillDeadlineSeconds"},
	} {
		u := &unstructured.Unstructured{}
		doc := "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: bad}\nspec: " + tc.spec
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		_, err := s.buffers.Create(s.ctx, u, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("creating a buffer with spec %s: %v, want a validation error naming %s", tc.spec, err, tc.want)
		}
		_ = s.buffers.Delete(s.ctx, "bad", metav1.DeleteOptions{})
	}

	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}})
	s.apply(t, `apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: capped}
spec:
  refillStrategy: none
  podTemplateRef: {name: chunk}
  replicas: 2
  limits: {cpu: "3"}`)
	b := s.waitBuffer(t, "capped", "InvalidSpec", time.Minute, condition(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, buffers.ReasonInvalid))
	if !condition(v1beta1.ConditionProvisioning, metav1.ConditionFalse, buffers.ReasonNotReady)(b) {
		t.Errorf("status %+v: want Provisioning=False/NotReadyForProvisioning", b.Status.Conditions)
	}
	s.stayNodes(t, g, 0, 3*time.Second)
}
