package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider/kwok"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A gang of two one-member-per-node pods on two underused nodes a and b,
// minCount 1, so that either member alone could move to the other node.
// In mode All the gang moves only whole: with nowhere to go together,
// neither node goes (the autoscaler says the gang keeps both); with room
// for both, both go. In mode Single one node goes and the other, left
// with nowhere to send its member, stays.
func TestScaleDownDisruptionModes(t *testing.T) {
	t.Parallel()
	// The names make namespaces: lowercase and dashes only.
	tests := []struct {
		name string
		all  bool
		room bool
	}{
		{name: "all-stays", all: true},             // nowhere to go together: neither node goes
		{name: "all-moves", all: true, room: true}, // room for the whole gang: both go
		{name: "single", all: false},               // one node goes
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScenario(t)
			g := s.cpuGroup("cpu", 4)
			a, b := s.existingNode(t, g, "a", nil), s.existingNode(t, g, "b", nil)
			room := ""
			if tc.room {
				room = s.existingNode(t, g, "room", nil)
				s.c.Create(s.ctx, t, s.pod("busy").CPU("2").Node(room).Obj()) // half full: not a candidate
			}
			s.c.Create(s.ctx, t, builder.PodGroup(s.ns, "train").MinCount(1).Disruption(tc.all).Obj())
			for i, node := range []string{a, b} {
				// safe-to-evict: only the gang's rule may keep the node.
				s.c.Create(s.ctx, t, s.pod(fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").Node(node).Annotation(safeToEvict, "true").Obj())
			}
			m := s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, append(fastScaleDown, "--namespace="+s.ns)...)
			switch {
			case tc.all && !tc.room:
				// Each node could go alone; the gang's rule is what keeps
				// both, in the same pass.
				metricAtLeast(t, s, m, `cluster_autoscaler_unremovable_nodes_count{reason="RunningGangMember"}`, 2, 90*time.Second)
				for _, n := range []string{a, b} {
					if ok, err := s.nodeExists(s.ctx, n); !ok || err != nil {
						t.Errorf("node %s removed (err %v): the All gang was split", n, err)
					}
				}
			case tc.all:
				s.waitNodeGone(t, a, 90*time.Second)
				s.waitNodeGone(t, b, 30*time.Second)
				metricAtLeast(t, s, m, `cluster_autoscaler_evicted_pods_total`, 2, 10*time.Second)
				if ok, _ := s.nodeExists(s.ctx, room); !ok {
					t.Errorf("node %s, the gang's new room, was removed", room)
				}
			default:
				// a is tried first (names break the tie): its member
				// fits on b, and b's then fits nowhere.
				s.waitNodeGone(t, a, 90*time.Second)
				st := s.waitStatus(t, "a pass after the removal keeps b", func(st *status.AutoscalerStatus) bool {
					gs := groupStatus(st, g.Name)
					return gs != nil && gs.Health.NodeCounts.Registered.Total == 1 && gs.ScaleDown.Candidates == 0
				})
				t.Logf("status of %s: %+v", g.Name, groupStatus(st, g.Name))
				if ok, err := s.nodeExists(s.ctx, b); !ok || err != nil {
					t.Errorf("node %s removed too (err %v)", b, err)
				}
			}
		})
	}
}

// Two nodes equal but for the disruption cost of their pods, and room for
// one pod only: the node whose pod costs less goes, though its name sorts
// after the other's (the tie-break without costs). The cooldown after the
// removal outlasts the test, so the other node's staying is no window.
func TestScaleDownPrefersLowerDisruptionCost(t *testing.T) {
	t.Parallel()
	s := newScenario(t)
	g := s.cpuGroup("cpu", 4)
	dear, cheap := s.existingNode(t, g, "a-dear", nil), s.existingNode(t, g, "b-cheap", nil)
	room := s.existingNode(t, g, "room", nil)
	s.c.Create(s.ctx, t, s.pod("busy").CPU("2").Node(room).Obj()) // room for one of the two pods
	s.c.Create(s.ctx, t,
		s.pod("dear").CPU("1500m").Node(dear).Annotation(safeToEvict, "true").
			Annotation("node-autoscaling.kubernetes.io/disruption-cost", "1000").Obj(),
		s.pod("cheap").CPU("1500m").Node(cheap).Annotation(safeToEvict, "true").
			Annotation("controller.kubernetes.io/pod-deletion-cost", "5").Obj())
	s.c.StartAutoscaler(t, kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}, append(fastScaleDown, "--scale-down-delay-after-delete=10m")...)
	s.waitNodeGone(t, cheap, 90*time.Second)
	if ok, err := s.nodeExists(s.ctx, dear); !ok || err != nil {
		t.Errorf("node %s, whose pod costs more, was removed too (err %v)", dear, err)
	}
	p, err := s.c.Client.CoreV1().Pods(s.ns).Get(s.ctx, "dear", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the dear pod was evicted (err %v)", err)
	}
}
