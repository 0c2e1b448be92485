package upkeep

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown/drainability"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// drainFixture is node a-a of group "a" with one pod that runs forever,
// counted against res by a stage that may drain.
type drainFixture struct {
	client *fake.Clientset
	policy *reservations.Policy
	keeper *Keeper
	groups []*nodegroups.Info
	pods   []*corev1.Pod
}

func newDrainFixture(node *corev1.Node, p cloudprovider.CloudProvider) *drainFixture {
	node.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	pod := builder.Pod("ns", "long").Node(node.Name).Obj()
	client := fake.NewClientset(node, pod)
	return &drainFixture{
		client: client,
		policy: reservations.New(reservations.Options{EndMargin: 30 * time.Minute}, p, nil, nil),
		keeper: New(client, nil, nil, evictor(client)),
		groups: []*nodegroups.Info{{Id: "a", Target: 1, Ready: []*corev1.Node{node}, Template: &cloudprovider.NodeTemplate{Node: tmpl("on-demand")}}},
		pods:   []*corev1.Pod{pod},
	}
}

func (f *drainFixture) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), "a-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *drainFixture) evictions() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "eviction" {
			n++
		}
	}
	return n
}

func TestOnlyCapacityBlocksAreDrained(t *testing.T) {
	window := func(kind cloudprovider.ReservationKind, end time.Duration) cloudprovider.ReservedCapacity {
		return cloudprovider.ReservedCapacity{ID: "r", Kind: kind, NodeGroups: []string{"a"}, Count: 1,
			Start: now.Add(-time.Hour), End: now.Add(end)}
	}
	tests := []struct {
		name      string
		res       cloudprovider.ReservedCapacity
		wantDrain bool
		// wantOn: the node still counts on the reservation.
		wantOn bool
	}{
		{"block ending within the margin", window(cloudprovider.ReservationCapacityBlock, 10*time.Minute), true, true},
		{"block that ended", window(cloudprovider.ReservationCapacityBlock, -time.Minute), true, true},
		{"block ending later", window(cloudprovider.ReservationCapacityBlock, 2*time.Hour), false, true},
		{"open reservation ending within the margin", window(cloudprovider.ReservationOpen, 10*time.Minute), false, true},
		{"open reservation that ended", window(cloudprovider.ReservationOpen, -time.Minute), false, false},
		{"targeted reservation that ended", window(cloudprovider.ReservationTargeted, -time.Minute), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newDrainFixture(builder.Node("a-a").Obj(), provider{res: []cloudprovider.ReservedCapacity{tc.res}})
			update(f.policy, f.keeper, f.groups, f.pods)
			n := f.node(t)
			drained := n.Spec.Unschedulable || f.evictions() > 0
			if drained != tc.wantDrain {
				t.Errorf("cordoned %v, %d evictions; want drained %v", n.Spec.Unschedulable, f.evictions(), tc.wantDrain)
			}
			if tc.wantDrain && n.Annotations[AnnotationCordonedBy] != "capacity-block/r" {
				t.Errorf("annotations %v, want %s=capacity-block/r with the cordon", n.Annotations, AnnotationCordonedBy)
			}
			if on := f.policy.Book().NodeSlot("a-a") != nil; on != tc.wantOn {
				t.Errorf("node counted on the reservation: %v, want %v", on, tc.wantOn)
			}
		})
	}
}

func TestCordonLiftedWhenTheBlockNoLongerEnds(t *testing.T) {
	block := func(end time.Duration, groups ...string) cloudprovider.ReservedCapacity {
		return cloudprovider.ReservedCapacity{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: groups, Count: 1,
			Start: now.Add(-time.Hour), End: now.Add(end)}
	}
	ours := map[string]string{AnnotationCordonedBy: "capacity-block/b"}
	tests := []struct {
		name        string
		annotations map[string]string
		provider    provider
		wantCordon  bool
	}{
		{"end moved later", ours, provider{res: []cloudprovider.ReservedCapacity{block(2*time.Hour, "a")}}, false},
		{"reservation deleted", ours, provider{}, false},
		{"node no longer on it", ours, provider{res: []cloudprovider.ReservedCapacity{block(10*time.Minute, "other")}}, false},
		{"block still ending", ours, provider{res: []cloudprovider.ReservedCapacity{block(10*time.Minute, "a")}}, true},
		{"reservations unavailable: the block may still be there", ours, provider{err: errors.New("throttled")}, true},
		{"cordoned by someone else", map[string]string{"owner": "ops"}, provider{}, true},
		{"someone else's mark", map[string]string{AnnotationCordonedBy: "maintenance"}, provider{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := builder.Node("a-a").Obj()
			node.Spec.Unschedulable = true
			node.Annotations = tc.annotations
			f := newDrainFixture(node, tc.provider)
			update(f.policy, f.keeper, f.groups, f.pods)
			n := f.node(t)
			if n.Spec.Unschedulable != tc.wantCordon {
				t.Errorf("unschedulable = %v, want %v", n.Spec.Unschedulable, tc.wantCordon)
			}
			_, marked := n.Annotations[AnnotationCordonedBy]
			if wantMark := tc.annotations[AnnotationCordonedBy] != "" && tc.wantCordon; marked != wantMark {
				t.Errorf("annotations %v: marked %v, want %v", n.Annotations, marked, wantMark)
			}
		})
	}
}

// The drain of an ending block asks the safety gate: while the cluster is
// unhealthy the node is neither cordoned nor drained, and the drain goes
// on once the gate allows it.
func TestBlockDrainHeldWhileUnhealthy(t *testing.T) {
	res := cloudprovider.ReservedCapacity{ID: "r", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"a"}, Count: 1,
		Start: now.Add(-time.Hour), End: now.Add(10 * time.Minute)}
	f := newDrainFixture(builder.Node("a-a").Label(reservations.LabelCapacityType, "on-demand").Obj(), provider{res: []cloudprovider.ReservedCapacity{res}})
	gate := safety.New(safety.Options{}, nil, nil)
	f.keeper.WithGate(gate)
	gate.Open(safety.OpenInput{Unsafe: "5 of 6 nodes unready", Groups: f.groups, Now: now})
	update(f.policy, f.keeper, f.groups, f.pods)
	if f.node(t).Spec.Unschedulable || f.evictions() != 0 {
		t.Fatalf("unhealthy: cordoned %v, %d evictions; want neither", f.node(t).Spec.Unschedulable, f.evictions())
	}
	if r := gate.Refused(); len(r) != 1 || r[0].Action != safety.ActionBlockDrain || r[0].Rule != safety.RuleUnhealthy {
		t.Fatalf("refusals %+v, want the block drain held for health", r)
	}
	gate.Open(safety.OpenInput{Groups: f.groups, Now: now})
	update(f.policy, f.keeper, f.groups, f.pods)
	if !f.node(t).Spec.Unschedulable || f.evictions() != 1 {
		t.Fatalf("healthy again: cordoned %v, %d evictions; want the drain", f.node(t).Spec.Unschedulable, f.evictions())
	}
}

// A gang in mode All with one member on a node of an ending block and
// one elsewhere: draining the node would split it, so the drain is held
// back (one event) until the other member is gone too.
func TestBlockDrainKeepsAllGroupsWhole(t *testing.T) {
	node := builder.Node("a-a").Obj()
	node.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	here := builder.Pod("ns", "train-0").PodGroup("train").Node("a-a").Obj()
	there := builder.Pod("ns", "train-1").PodGroup("train").Node("elsewhere").Obj()
	groups := []*schedulingv1beta1.PodGroup{builder.PodGroup("ns", "train").MinCount(1).Disruption(true).Obj()}
	client := fake.NewClientset(node, here, there)
	rec := record.NewFakeRecorder(10)
	block := object(map[string]any{"type": "CapacityBlock", "nodeGroups": []any{"a"}, "count": int64(1),
		"start": now.Add(-time.Hour).Format(time.RFC3339), "end": now.Add(10 * time.Minute).Format(time.RFC3339)})
	p := reservations.New(reservations.Options{EndMargin: 30 * time.Minute}, nil, objects{block}, nil)
	k := New(client, nil, rec, evictor(client))
	infos := []*nodegroups.Info{{Id: "a", Target: 1, Ready: []*corev1.Node{node}, Template: &cloudprovider.NodeTemplate{Node: tmpl("reserved")}}}
	f := &drainFixture{client: client}
	pass := func(pods ...*corev1.Pod) {
		c := p.Count(context.Background(), infos, pods, now)
		k.Run(context.Background(), c, pods, drainability.NewGangs(groups, nil, pods))
	}

	for range 2 {
		pass(here, there)
	}
	if f.node(t).Spec.Unschedulable || f.evictions() != 0 {
		t.Fatalf("split gang: cordoned %v, %d evictions; want the drain held", f.node(t).Spec.Unschedulable, f.evictions())
	}
	if got := events(rec); len(got) != 1 || !strings.Contains(got[0], EventDrainHeldForGroup) || !strings.Contains(got[0], "ns/train") {
		t.Fatalf("events %q, want one %s naming the gang", got, EventDrainHeldForGroup)
	}
	pass(here) // the other member ended
	if !f.node(t).Spec.Unschedulable || f.evictions() != 1 {
		t.Fatalf("gang on the block only: cordoned %v, %d evictions; want the drain", f.node(t).Spec.Unschedulable, f.evictions())
	}
}

// events drains what the recorder holds so far.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
