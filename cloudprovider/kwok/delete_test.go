package kwok

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// grown returns an env whose "gpu" group was asked for n nodes, once
// registered of them have registered and published their slices.
func grown(t *testing.T, minSize, n, registered int, faults FaultsConfig) (*env, *nodeGroup) {
	t.Helper()
	g := gpuGroup("gpu", minSize, 10)
	g.Faults = faults
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}, Reservations: nil})
	ng := e.group(t, "gpu")
	_, _ = ng.IncreaseSize(t.Context(), n)
	eventually(t, "nodes and slices", func() bool {
		nodes := e.nodes(t)
		for _, node := range nodes {
			if len(e.slices(t, node.Name)) != 2 {
				return false
			}
		}
		r, _, _ := states(t, ng)
		return r == registered && len(nodes) == registered
	})
	return e, ng
}

// fakeNode is how upstream-style callers name an instance without a Node.
func fakeNode(id string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: id}}
}

func TestDeleteNodes(t *testing.T) {
	tests := []struct {
		name       string
		minSize    int
		force      bool
		wantErr    string
		wantTarget int
	}{
		{name: "delete", wantTarget: 1},
		{name: "refused below minSize", minSize: 2, wantErr: "below minSize 2", wantTarget: 2},
		{name: "forced below minSize", minSize: 2, force: true, wantTarget: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ng := grown(t, tc.minSize, 2, 2, FaultsConfig{})
			nodes := e.nodes(t)
			victim, survivor := nodes[0], nodes[1]
			var err error
			if tc.force {
				err = ng.ForceDeleteNodes(t.Context(), []*corev1.Node{&victim})
			} else {
				err = ng.DeleteNodes(t.Context(), []*corev1.Node{&victim})
			}
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if got := targetSize(t, ng); got != tc.wantTarget {
				t.Errorf("target = %d, want %d", got, tc.wantTarget)
			}
			wantNodes, wantSlices := 1, 0
			if tc.wantErr != "" {
				wantNodes, wantSlices = 2, 2
			}
			if n := len(e.nodes(t)); n != wantNodes {
				t.Errorf("%d nodes left, want %d", n, wantNodes)
			}
			if n := len(e.slices(t, victim.Name)); n != wantSlices {
				t.Errorf("victim has %d slices left, want %d", n, wantSlices)
			}
			if n := len(e.slices(t, survivor.Name)); n != 2 {
				t.Errorf("survivor has %d slices, want 2", n)
			}
		})
	}
}

func TestDeleteNodesOfOtherGroupRefused(t *testing.T) {
	e, ng := grown(t, 0, 1, 1, FaultsConfig{})
	for _, node := range []*corev1.Node{
		builder.Node("foreign").Obj(),
		builder.Node("cpu-abcde").Label(LabelNodeGroup, "cpu").Obj(),
	} {
		if err := ng.DeleteNodes(t.Context(), []*corev1.Node{node}); err == nil || !strings.Contains(err.Error(), "does not belong") {
			t.Errorf("DeleteNodes(%s) = %v, want a refusal", node.Name, err)
		}
	}
	if n := len(e.nodes(t)); n != 1 {
		t.Errorf("%d nodes, want 1", n)
	}
}

// Instances without a Node are deleted by providerID: failed creations
// are forgotten without touching the target (it never counted them),
// never-registering ones lower it.
func TestDeleteInstancesWithoutNode(t *testing.T) {
	e, ng := grown(t, 0, 3, 1, FaultsConfig{OutOfResourcesAfter: ptr.To(2), NeverRegisterAfter: ptr.To(1)})
	if got := targetSize(t, ng); got != 2 {
		t.Fatalf("target = %d, want 2", got)
	}
	instances, _ := ng.Nodes()
	var failed, pending string
	for _, inst := range instances {
		switch {
		case inst.Status.ErrorInfo != nil:
			failed = inst.Id
		case inst.Status.State == cloudprovider.InstanceCreating:
			pending = inst.Id
		}
	}
	if failed == "" || pending == "" {
		t.Fatalf("instances %+v lack a failed and a pending one", instances)
	}
	if err := ng.DeleteNodes(t.Context(), []*corev1.Node{fakeNode(failed)}); err != nil {
		t.Fatalf("deleting the failed instance: %v", err)
	}
	if got := targetSize(t, ng); got != 2 {
		t.Errorf("target after deleting the failed instance = %d, want 2", got)
	}
	if err := ng.ForceDeleteNodes(t.Context(), []*corev1.Node{fakeNode(pending)}); err != nil {
		t.Fatalf("deleting the unregistered instance: %v", err)
	}
	if got := targetSize(t, ng); got != 1 {
		t.Errorf("target after deleting the unregistered instance = %d, want 1", got)
	}
	if r, c, f := states(t, ng); r != 1 || c != 0 || f != 0 {
		t.Errorf("running %d creating %d failed %d, want 1 0 0", r, c, f)
	}
	if n := len(e.nodes(t)); n != 1 {
		t.Errorf("%d nodes, want 1", n)
	}
}

func TestDecreaseTargetSize(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.BootDelay = metav1.Duration{Duration: 10 * time.Second}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "gpu")
	if _, err := ng.IncreaseSize(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(10 * time.Second)
	eventually(t, "first node", func() bool { r, _, _ := states(t, ng); return r == 1 })
	if _, err := ng.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}

	for _, delta := range []int{0, 1, -4} {
		if err := ng.DecreaseTargetSize(t.Context(), delta); err == nil {
			t.Errorf("DecreaseTargetSize(%d) succeeded", delta)
		}
	}
	if err := ng.DecreaseTargetSize(t.Context(), -2); err != nil {
		t.Fatalf("DecreaseTargetSize(-2): %v", err)
	}
	if got := targetSize(t, ng); got != 2 {
		t.Errorf("target = %d, want 2", got)
	}
	e.clock.Step(10 * time.Second)
	eventually(t, "second node", func() bool { r, _, _ := states(t, ng); return r == 2 })
	if err := ng.DecreaseTargetSize(t.Context(), -1); err == nil {
		t.Error("DecreaseTargetSize removed a registered node")
	}
	if n := len(e.nodes(t)); n != 2 {
		t.Errorf("%d nodes, want 2", n)
	}
}

// Cleanup stops boot goroutines that wait for their delay: afterwards no
// node appears however far time moves.
func TestCleanupStopsBootGoroutines(t *testing.T) {
	g := gpuGroup("gpu", 0, 10)
	g.BootDelay = metav1.Duration{Duration: time.Minute}
	e := newEnv(t, &Config{NodeGroups: []NodeGroupConfig{g}})
	ng := e.group(t, "gpu")
	if _, err := ng.IncreaseSize(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = e.p.Cleanup(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Cleanup did not return")
	}
	e.clock.Step(time.Hour)
	if n := len(e.nodes(t)); n != 0 {
		t.Errorf("%d nodes appeared after Cleanup", n)
	}
	if _, err := ng.IncreaseSize(t.Context(), 1); err == nil {
		t.Error("IncreaseSize after Cleanup succeeded")
	}
}
