package kwok

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// With seed 7 the "gpu" group's failure source strikes the 4th and the 6th
// of its first 10 draws at rate 0.2, with seed 3 none of them
// (math/rand/v2's PCG is stable across Go releases).
const seedTwoInTen, seedNoneInTen = 7, 3

func increase(t *testing.T, ng *nodeGroup, atomic bool, delta int) ([]string, error) {
	t.Helper()
	if atomic {
		return ng.AtomicIncreaseSize(t.Context(), delta)
	}
	return ng.IncreaseSize(t.Context(), delta)
}

// notReady counts the nodes that no kwok controller manages and that
// registered NotReady and tainted.
func notReady(t *testing.T, nodes []corev1.Node) int {
	t.Helper()
	n := 0
	for _, node := range nodes {
		_, managed := node.Annotations[AnnotationKwokNode]
		ready := len(node.Status.Conditions) == 0 || node.Status.Conditions[0].Status == corev1.ConditionTrue
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || (taint.Key == corev1.TaintNodeNotReady && taint.Effect == corev1.TaintEffectNoSchedule)
		}
		if managed != ready || ready == tainted {
			t.Errorf("node %s: kwok annotation %t, Ready %t, not-ready taint %t: want all three consistent", node.Name, managed, ready, tainted)
		}
		if !ready {
			n++
		}
	}
	return n
}

func TestRandomAndNeverReadyFaults(t *testing.T) {
	tests := []struct {
		name    string
		faults  FaultsConfig
		atomic  bool
		delta   int
		wantErr []error
		// right after the call, then after the boot delay
		wantIDs, wantTarget, wantRunning, wantCreating, wantFailed, wantNotReady int
	}{
		{name: "every creation fails at request", faults: FaultsConfig{FailureRate: 1}, delta: 3,
			wantErr: []error{ErrInjectedFailure}, wantFailed: 3},
		{name: "atomic refused when any would fail", faults: FaultsConfig{FailureRate: 0.2, Seed: seedTwoInTen}, atomic: true, delta: 10,
			wantErr: []error{ErrInjectedFailure}},
		{name: "atomic with no failure drawn", faults: FaultsConfig{FailureRate: 0.2, Seed: seedNoneInTen}, atomic: true, delta: 10,
			wantIDs: 10, wantTarget: 10, wantRunning: 10},
		{name: "20% fail at request", faults: FaultsConfig{FailureRate: 0.2, Seed: seedTwoInTen}, delta: 10,
			wantErr: []error{ErrInjectedFailure}, wantIDs: 8, wantTarget: 8, wantRunning: 8, wantFailed: 2},
		{name: "quota and failures", faults: FaultsConfig{FailureRate: 1, OutOfResourcesAfter: ptr.To(2)}, delta: 3,
			wantErr: []error{ErrInjectedFailure, ErrOutOfResources}, wantFailed: 3},
		{name: "20% never register, atomic", faults: FaultsConfig{FailureRate: 0.2, FailureMode: FailNeverRegister, Seed: seedTwoInTen}, atomic: true, delta: 10,
			wantIDs: 10, wantTarget: 10, wantRunning: 8, wantCreating: 2},
		{name: "20% never ready", faults: FaultsConfig{FailureRate: 0.2, FailureMode: FailNeverReady, Seed: seedTwoInTen}, delta: 10,
			wantIDs: 10, wantTarget: 10, wantRunning: 10, wantNotReady: 2},
		{name: "never ready", faults: FaultsConfig{NeverReady: true}, delta: 2,
			wantIDs: 2, wantTarget: 2, wantRunning: 2, wantNotReady: 2},
		{name: "never ready after 1", faults: FaultsConfig{NeverReadyAfter: ptr.To(1)}, atomic: true, delta: 3,
			wantIDs: 3, wantTarget: 3, wantRunning: 3, wantNotReady: 2},
		{name: "never register wins over never ready", faults: FaultsConfig{NeverRegister: true, NeverReady: true}, delta: 2,
			wantIDs: 2, wantTarget: 2, wantCreating: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := gpuGroup("gpu", 0, 10)
			g.BootDelay = metav1.Duration{Duration: time.Second}
			g.Faults = tc.faults
			e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
			ng := e.group(t, "gpu")

			ids, err := increase(t, ng, tc.atomic, tc.delta)
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %v does not wrap %v", err, want)
				}
			}
			if len(ids) != tc.wantIDs || targetSize(t, ng) != tc.wantTarget {
				t.Errorf("%d ids, target %d; want %d, %d", len(ids), targetSize(t, ng), tc.wantIDs, tc.wantTarget)
			}

			e.clock.Step(time.Second)
			eventually(t, "registrations", func() bool { r, _, _ := states(t, ng); return r == tc.wantRunning })
			e.clock.Step(time.Hour)
			if r, c, f := states(t, ng); r != tc.wantRunning || c != tc.wantCreating || f != tc.wantFailed {
				t.Errorf("running %d creating %d failed %d, want %d %d %d", r, c, f, tc.wantRunning, tc.wantCreating, tc.wantFailed)
			}
			if n := notReady(t, e.nodes(t)); n != tc.wantNotReady {
				t.Errorf("%d nodes NotReady, want %d", n, tc.wantNotReady)
			}
			instances, _ := ng.Nodes()
			for _, inst := range instances {
				if info := inst.Status.ErrorInfo; info != nil && info.ErrorCode == "InjectedFailure" &&
					(info.ErrorClass != cloudprovider.OtherErrorClass || inst.Status.State != cloudprovider.InstanceCreating) {
					t.Errorf("failed instance %s status %+v, want Creating with OtherErrorClass", inst.Id, *info)
				}
			}
		})
	}
}

// failurePattern requests 4 nodes 5 times and returns how many failed
// each time; between requests it polls Nodes() and TargetSize() polls
// times, whose error rates draw from sources of their own.
func failurePattern(t *testing.T, seed int64, polls int) []int {
	t.Helper()
	g := cpuGroup("gpu", 0, 100)
	g.Faults = FaultsConfig{FailureRate: 0.3, Seed: seed, NodesErrorRate: 0.5, TargetSizeErrorRate: 0.5}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "gpu")
	var out []int
	for range 5 {
		ids, _ := ng.IncreaseSize(t.Context(), 4)
		out = append(out, 4-len(ids))
		for range polls {
			_, _ = ng.Nodes()
			_, _ = ng.TargetSize()
		}
	}
	return out
}

func TestFailureRateIsSeeded(t *testing.T) {
	first, again, polled, other := failurePattern(t, 1, 0), failurePattern(t, 1, 0), failurePattern(t, 1, 7), failurePattern(t, 2, 0)
	if !equalInts(first, again) {
		t.Errorf("same seed, same calls: failures %v then %v", first, again)
	}
	if !equalInts(first, polled) {
		t.Errorf("polling Nodes() and TargetSize() changed the failures: %v, %v", first, polled)
	}
	if equalInts(first, other) {
		t.Errorf("seeds 1 and 2 gave the same failures %v", first)
	}
	total := 0
	for _, n := range first {
		total += n
	}
	if total == 0 || total == 20 {
		t.Errorf("failures %v at rate 0.3: want some but not all", first)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAPIErrorRates(t *testing.T) {
	tests := []struct {
		name                  string
		nodesRate, targetRate float64
		// of 40 calls each
		wantNodesErrs, wantTargetErrs func(int) bool
	}{
		{"none", 0, 0, is(0), is(0)},
		{"always", 1, 1, is(40), is(40)},
		{"sometimes", 0.5, 0.25, between(5, 35), between(1, 25)},
		{"only Nodes", 0.5, 0, between(5, 35), is(0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := cpuGroup("cpu", 0, 5)
			g.Faults = FaultsConfig{NodesErrorRate: tc.nodesRate, TargetSizeErrorRate: tc.targetRate, Seed: 5}
			e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
			ng := e.group(t, "cpu")
			if _, err := ng.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			nodesErrs, targetErrs := 0, 0
			for range 40 {
				if instances, err := ng.Nodes(); err != nil {
					nodesErrs++
					if !errors.Is(err, ErrInjectedFailure) || instances != nil {
						t.Errorf("Nodes() = %v, %v; want nil and an injected error", instances, err)
					}
				} else if len(instances) != 1 {
					t.Errorf("Nodes() = %v, want 1 instance", instances)
				}
				if n, err := ng.TargetSize(); err != nil {
					targetErrs++
					if !errors.Is(err, ErrInjectedFailure) {
						t.Errorf("TargetSize() error %v, want an injected one", err)
					}
				} else if n != 1 {
					t.Errorf("TargetSize() = %d, want 1", n)
				}
			}
			if !tc.wantNodesErrs(nodesErrs) || !tc.wantTargetErrs(targetErrs) {
				t.Errorf("%d Nodes() and %d TargetSize() errors of 40 calls each", nodesErrs, targetErrs)
			}
			if got := ng.Debug(); got != "cpu (min 0, max 5, target 1)" {
				t.Errorf("Debug() = %q: it must not fail with TargetSize", got)
			}
		})
	}
}

func is(n int) func(int) bool           { return func(got int) bool { return got == n } }
func between(lo, hi int) func(int) bool { return func(got int) bool { return got >= lo && got <= hi } }

// A provider that cannot name its instances at request time: the target
// grows at once, Nodes() shows them only once they are old enough.
func TestInstancesVisibleAfter(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		g := cpuGroup("cpu", 0, 5)
		g.BootDelay = metav1.Duration{Duration: time.Second}
		g.Faults.InstancesVisibleAfter = metav1.Duration{Duration: time.Minute}
		e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
		ng := e.group(t, "cpu")
		created := e.clock.Now()
		ids, err := increase(t, ng, atomic, 2)
		if err != nil || ids != nil {
			t.Fatalf("atomic %t: IncreaseSize = %v, %v; want no ids and no error", atomic, ids, err)
		}
		if got := targetSize(t, ng); got != 2 {
			t.Errorf("atomic %t: target %d, want 2 at once", atomic, got)
		}
		e.clock.Step(time.Second)
		eventually(t, "nodes registered", func() bool { return len(e.nodes(t)) == 2 })
		e.clock.Step(time.Minute - time.Second - time.Millisecond)
		if instances, _ := ng.Nodes(); len(instances) != 0 {
			t.Errorf("atomic %t: Nodes() = %v before instancesVisibleAfter", atomic, instances)
		}
		e.clock.Step(time.Millisecond)
		instances, _ := ng.Nodes()
		if len(instances) != 2 || !instances[0].CreatedAt.Equal(created) {
			t.Errorf("atomic %t: Nodes() = %+v after instancesVisibleAfter, want 2 created at %s", atomic, instances, created)
		}
	}
}

// settled waits until no goroutine of the group's instances runs.
func settled(t *testing.T, e *env, ng *nodeGroup) {
	t.Helper()
	e.p.mu.Lock()
	var done []chan struct{}
	for _, inst := range ng.instances {
		if inst.done != nil {
			done = append(done, inst.done)
		}
	}
	e.p.mu.Unlock()
	for _, d := range done {
		select {
		case <-d:
		case <-time.After(5 * time.Second):
			t.Fatal("instance goroutine did not finish")
		}
	}
}

func TestDriverFaults(t *testing.T) {
	tests := []struct {
		name   string
		group  NodeGroupConfig
		faults FaultsConfig
		// per node: slice names by driver, and whether each pool is
		// incomplete (fewer slices than its resourceSliceCount)
		wantSlices     map[string]int
		wantIncomplete bool
	}{
		{name: "complete", group: gpuGroup("gpu", 0, 2), wantSlices: map[string]int{"gpu.example.com": 1, "nic.example.com": 1}},
		{name: "drivers never publish", group: gpuGroup("gpu", 0, 2), faults: FaultsConfig{DriversNeverPublish: true}, wantSlices: map[string]int{}},
		{name: "incomplete pools of one slice", group: gpuGroup("gpu", 0, 2), faults: FaultsConfig{IncompletePool: true},
			wantSlices: map[string]int{"gpu.example.com": 1, "nic.example.com": 1}, wantIncomplete: true},
		{name: "counters published, devices not", group: partitionableGroup("gpu"), faults: FaultsConfig{IncompletePool: true},
			wantSlices: map[string]int{"gpu.example.com": 1}, wantIncomplete: true},
		{name: "counters and devices", group: partitionableGroup("gpu"), wantSlices: map[string]int{"gpu.example.com": 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.group
			g.DriverDelay = metav1.Duration{Duration: time.Second}
			g.Faults = tc.faults
			e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
			ng := e.group(t, "gpu")
			if _, err := ng.IncreaseSize(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
			e.clock.Step(time.Second)
			settled(t, e, ng)
			nodes := e.nodes(t)
			if len(nodes) != 1 {
				t.Fatalf("%d nodes, want 1: driver faults do not stop registration", len(nodes))
			}
			got := map[string]int{}
			published := map[string][]int64{}
			for _, s := range e.slices(t, nodes[0].Name) {
				got[s.Spec.Driver]++
				published[s.Spec.Driver] = append(published[s.Spec.Driver], s.Spec.Pool.ResourceSliceCount)
			}
			if len(got) != len(tc.wantSlices) {
				t.Errorf("slices by driver %v, want %v", got, tc.wantSlices)
			}
			for driver, n := range tc.wantSlices {
				if got[driver] != n {
					t.Errorf("driver %s published %d slices, want %d", driver, got[driver], n)
				}
				for _, count := range published[driver] {
					if incomplete := int64(got[driver]) < count; incomplete != tc.wantIncomplete || count > int64(got[driver])+1 {
						t.Errorf("driver %s: %d slices of a pool of %d, want incomplete %t (by one)", driver, got[driver], count, tc.wantIncomplete)
					}
				}
			}
			if tmpl, _ := ng.TemplateNodeInfo(); len(tmpl.ResourceSlices) != len(g.buildSlices("x")) {
				t.Errorf("template has %d slices: faults must not change it", len(tmpl.ResourceSlices))
			}
		})
	}
}
