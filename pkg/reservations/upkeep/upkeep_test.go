package upkeep

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestInvalidObjectsGetOneEventAndAreIgnored(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	bad := object(map[string]any{"nodeGroups": []any{"a"}, "count": int64(-2)})
	good := object(map[string]any{"nodeGroups": []any{"a"}, "count": int64(1)})
	good.SetName("good")
	s := reservations.New(reservations.Options{}, nil, objects{bad, good}, nil)
	k := New(nil, nil, rec, nil)
	groups := []*nodegroups.Info{{Id: "a", Template: &cloudprovider.NodeTemplate{Node: tmpl("reserved")}}}
	for range 3 {
		update(s, k, groups, nil)
	}
	if got := len(s.Book().Slots()); got != 1 || s.Book().Slots()[0].ID != "good" {
		t.Errorf("slots %v, want only the valid object", s.Book().Slots())
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	if len(events) != 1 || !strings.Contains(events[0], "Warning "+EventInvalid) || !strings.Contains(events[0], "must not be negative") {
		t.Errorf("events %q, want one warning naming the count", events)
	}
}

func TestDrainEndingBlock(t *testing.T) {
	node := builder.Node("a-a").Obj()
	node.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	started := metav1.NewTime(now.Add(-time.Minute))
	long := builder.Pod("ns", "long").Node("a-a").Obj()
	short := builder.Pod("ns", "short").Node("a-a").Obj()
	short.Annotations = map[string]string{reservations.AnnotationExpectedRuntime: "2m"}
	short.Status.StartTime = &started
	ds := builder.Pod("ns", "ds").Node("a-a").OwnedBy("apps/v1", "DaemonSet", "agent").Obj()
	client := fake.NewClientset(node, long, short, ds)
	block := cloudprovider.ReservedCapacity{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"a"}, Count: 1,
		Start: now.Add(-time.Hour), End: now.Add(10 * time.Minute)}
	s := reservations.New(reservations.Options{EndMargin: 30 * time.Minute}, provider{res: []cloudprovider.ReservedCapacity{block}}, nil, nil)
	k := New(client, nil, nil, evictor(client))
	groups := []*nodegroups.Info{{Id: "a", Target: 1, Ready: []*corev1.Node{node}, Template: &cloudprovider.NodeTemplate{Node: tmpl("reserved")}}}
	update(s, k, groups, []*corev1.Pod{long, short, ds})

	var evicted []string
	cordoned := false
	for _, a := range client.Actions() {
		switch {
		case a.GetVerb() == "create" && a.GetSubresource() == "eviction":
			evicted = append(evicted, a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name)
		case a.GetVerb() == "patch" && a.GetResource().Resource == "nodes":
			cordoned = true
		}
	}
	if !cordoned {
		t.Error("the node of the ending block was not cordoned")
	}
	if len(evicted) != 1 || evicted[0] != "long" {
		t.Errorf("evicted %v, want only the pod that runs past the end", evicted)
	}
}
