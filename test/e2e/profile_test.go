package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
	"github.com/dra-autoscaler/dra-autoscaler/test/e2e/framework"
)

// A scheduler profile's plugin arguments are the autoscaler's too. The
// control plane's scheduler runs a second profile (controlplane.
// PoolSchedulerName) whose NodeAffinity addedAffinity requires
// PoolLabel=accel; the autoscaler simulates that profile alone, from the
// same profile given as --scheduler-config-file. Two groups are alike but
// for that label, the unlabelled one first by name; the pods name the
// profile and select nothing themselves. The plan grows the labelled
// group (a shared estimate would have copied the other's "fits nowhere"
// to it), the real scheduler binds every pod there, and the unlabelled
// group stays empty.
//
// Tests of the default scheduler are not disturbed: only pods naming
// the second profile meet it, and only this test's nodes carry the label.
func TestSchedulerProfileAddedAffinity(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	plain, accel := s.cpuGroup("a-plain", 3), s.cpuGroup("b-accel", 3)
	accel.Template.Labels[controlplane.PoolLabel] = controlplane.PoolValue
	cfg, err := builder.SchedulerConfigYAML(controlplane.PoolSchedulerProfile())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{plain, accel}},
		"--scheduler-config-file="+path, "--namespace="+s.ns)
	// 3 CPUs each on 4-CPU nodes: one node per pod.
	const pods = 3
	for i := range pods {
		s.c.Create(s.ctx, t, builder.Pod(s.ns, fmt.Sprintf("accel-%d", i)).CPU("3").
			SchedulerName(controlplane.PoolSchedulerName).Obj())
	}
	framework.Eventually(s.ctx, t, 3*time.Minute, "every pod bound", func(ctx context.Context) (bool, string, error) {
		n, seen, err := s.podsSeen(ctx)
		return n == pods, seen, err
	})
	accelNodes, err := s.groupNodes(s.ctx, accel.Name)
	if err != nil {
		t.Fatal(err)
	}
	inAccel := map[string]bool{}
	for _, n := range accelNodes {
		inAccel[n.Name] = n.Labels[controlplane.PoolLabel] == controlplane.PoolValue
	}
	for i := range pods {
		name := fmt.Sprintf("accel-%d", i)
		pod, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !inAccel[pod.Spec.NodeName] {
			t.Errorf("%s bound to %s, not a labelled node of %s", name, pod.Spec.NodeName, accel.Name)
		}
		// Events are recorded asynchronously: the pod may be bound first.
		msg := s.waitEvent(t, name, "TriggeredScaleUp", 30*time.Second, accel.Name)
		if strings.Contains(msg, plain.Name) {
			t.Errorf("%s: TriggeredScaleUp event %q, want the plan to name %s only", name, msg, accel.Name)
		}
	}
	if len(accelNodes) != pods {
		t.Errorf("%s has %d nodes, want %d", accel.Name, len(accelNodes), pods)
	}
	// Every pod is bound and named only the labelled group: nothing can
	// have asked for the other.
	if nodes, err := s.groupNodes(s.ctx, plain.Name); err != nil || len(nodes) != 0 {
		t.Errorf("%s has %d nodes (%v), want none", plain.Name, len(nodes), err)
	}
	// The harness runs the autoscaler in verify mode: every decision was
	// checked against the plain framework, and none differed.
	m, err := a.Metrics(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	checks, mismatches := sumSamples(m, "cluster_autoscaler_simulation_shadow_checks_total"),
		sumSamples(m, "cluster_autoscaler_simulation_shadow_mismatches_total")
	if checks == "0" || mismatches != "0" {
		t.Errorf("shadow checks %s (want some), mismatches %s (want 0)", checks, mismatches)
	}
}
