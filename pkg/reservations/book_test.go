package reservations

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func tmpl(capacityType string) *corev1.Node {
	return builder.Node("t").Label(LabelCapacityType, capacityType).Label(corev1.LabelInstanceTypeStable, "gpu-8x").Obj()
}

// nodes are n registered nodes of group, created a minute apart.
func nodes(group string, n int) []*corev1.Node {
	var out []*corev1.Node
	for i := range n {
		node := builder.Node(group + "-" + string(rune('a'+i))).Obj()
		node.CreationTimestamp = metav1.NewTime(now.Add(time.Duration(i) * time.Minute))
		out = append(out, node)
	}
	return out
}

// pinned labels the nodes with reservation id.
func pinned(ns []*corev1.Node, id string) []*corev1.Node {
	for _, n := range ns {
		n.Labels[LabelReservation] = id
	}
	return ns
}

func TestBookCounts(t *testing.T) {
	targeted := func(id string, count int, groups ...string) *Reservation {
		return &Reservation{ID: id, Kind: cloudprovider.ReservationTargeted, NodeGroups: groups, Count: count}
	}
	tests := []struct {
		name   string
		res    []*Reservation
		groups []GroupNodes
		// want is InUse and Left per reservation.
		want map[string][2]int
	}{{
		name:   "registered, booting and requested nodes all count",
		res:    []*Reservation{targeted("r", 4, "a")},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Nodes: nodes("a", 2), Size: 3}},
		want:   map[string][2]int{"r": {3, 1}},
	}, {
		name:   "groups sharing a reservation share its counter, never beyond it",
		res:    []*Reservation{targeted("r", 3, "a", "b")},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Size: 2}, {ID: "b", Template: tmpl("reserved"), Size: 2}},
		want:   map[string][2]int{"r": {3, 0}},
	}, {
		name:   "reservations fill in order",
		res:    []*Reservation{targeted("r1", 1, "a"), targeted("r2", 5, "a")},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Size: 3}},
		want:   map[string][2]int{"r1": {1, 0}, "r2": {2, 3}},
	}, {
		name:   "a block not started holds nothing and offers nothing",
		res:    []*Reservation{{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"a"}, Count: 2, Start: now.Add(time.Minute), End: now.Add(time.Hour)}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Size: 1}},
		want:   map[string][2]int{"b": {0, 0}},
	}, {
		name:   "an open reservation serves groups of its instance type",
		res:    []*Reservation{{ID: "o", Kind: cloudprovider.ReservationOpen, InstanceType: "gpu-8x", Count: 4}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("on-demand"), Size: 1}, {ID: "b", Template: tmpl("on-demand"), Size: 1}},
		want:   map[string][2]int{"o": {2, 2}},
	}, {
		name:   "a targeted reservation ignores the instance type",
		res:    []*Reservation{{ID: "t", Kind: cloudprovider.ReservationTargeted, InstanceType: "gpu-8x", NodeGroups: []string{"x"}, Count: 4}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("on-demand"), Size: 1}},
		want:   map[string][2]int{"t": {0, 4}},
	}, {
		name: "an open reservation that ended holds nothing",
		res: []*Reservation{{ID: "o", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"a"}, Count: 4,
			Start: now.Add(-2 * time.Hour), End: now.Add(-time.Minute), ReportedInUse: 2}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("on-demand"), Nodes: nodes("a", 2), Size: 2}},
		want:   map[string][2]int{"o": {0, 0}},
	}, {
		name: "a targeted reservation that ended holds nothing, pinned nodes neither",
		res: []*Reservation{{ID: "t", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a"}, Count: 4,
			End: now.Add(-time.Minute)}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("on-demand"), Nodes: pinned(nodes("a", 2), "t"), Size: 2}},
		want:   map[string][2]int{"t": {0, 0}},
	}, {
		name: "a block that ended keeps its registered nodes, to drain them",
		res: []*Reservation{{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"a"}, Count: 4,
			Start: now.Add(-2 * time.Hour), End: now.Add(-time.Minute)}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Nodes: nodes("a", 2), Size: 3}},
		want:   map[string][2]int{"b": {2, 0}},
	}, {
		name:   "the provider's count wins when higher",
		res:    []*Reservation{{ID: "p", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a"}, Count: 4, ReportedInUse: 3}},
		groups: []GroupNodes{{ID: "a", Template: tmpl("reserved"), Size: 1}},
		want:   map[string][2]int{"p": {3, 1}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(now, 30*time.Minute, tc.res, tc.groups)
			for _, s := range b.Slots() {
				got := [2]int{s.InUse, b.Left(s)}
				if got != tc.want[s.ID] {
					t.Errorf("%s: in use, left = %v, want %v", s.ID, got, tc.want[s.ID])
				}
			}
		})
	}
}

func TestBookTakeNeverExceeds(t *testing.T) {
	b := NewBook(now, 30*time.Minute, []*Reservation{{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a", "b"}, Count: 3}},
		[]GroupNodes{{ID: "a", Template: tmpl("reserved"), Size: 1}, {ID: "b", Template: tmpl("reserved")}})
	if got, _ := b.Take("a", 5, nil); got != 2 {
		t.Errorf("first take got %d reserved, want 2", got)
	}
	if got := b.Available("b", nil); got != 0 {
		t.Errorf("group b sees %d left after a took the rest, want 0", got)
	}
	if got, _ := b.Take("b", 1, nil); got != 0 {
		t.Errorf("second take got %d, want 0", got)
	}
}

func TestBookPinnedAndOldestNodes(t *testing.T) {
	ns := nodes("a", 3)
	ns[2].Labels[LabelReservation] = "r2"
	b := NewBook(now, 0, []*Reservation{
		{ID: "r1", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a"}, Count: 1},
		{ID: "r2", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a"}, Count: 1},
	}, []GroupNodes{{ID: "a", Template: tmpl("on-demand"), Nodes: ns, Size: 3}})
	for node, want := range map[string]string{"a-a": "r1", "a-b": "", "a-c": "r2"} {
		got := ""
		if s := b.NodeSlot(node); s != nil {
			got = s.ID
		}
		if got != want {
			t.Errorf("node %s on %q, want %q", node, got, want)
		}
	}
}

func TestLedgerCountsLaunchesNotYetVisible(t *testing.T) {
	l := newLedger(time.Minute)
	l.launched("a", 1, 2, now)
	if got := l.size("a", 1, now.Add(time.Second)); got != 3 {
		t.Errorf("size before the provider shows the launch = %d, want 3", got)
	}
	l.launched("a", 1, 1, now.Add(2*time.Second))
	if got := l.size("a", 1, now.Add(3*time.Second)); got != 4 {
		t.Errorf("size after a second launch = %d, want 4", got)
	}
	if got := l.size("a", 4, now.Add(4*time.Second)); got != 4 {
		t.Errorf("size once visible = %d, want 4", got)
	}
	l.launched("b", 0, 2, now)
	if got := l.size("b", 0, now.Add(2*time.Minute)); got != 0 {
		t.Errorf("size after the ttl = %d, want 0 (the request was given up)", got)
	}
}

func TestOpenReservationEndingSoonServesPodsWithoutRunTime(t *testing.T) {
	// An open reservation ending soon still serves a pod that declares no
	// run time: its nodes keep running after the end.
	open := &Reservation{ID: "o", Kind: cloudprovider.ReservationOpen, End: now.Add(time.Minute)}
	if !open.servesPod(builder.Pod("ns", "p").Obj(), now, 30*time.Minute) {
		t.Error("an open reservation ending soon refuses a pod without a declared run time")
	}
}

// A group that names a CapacityReservation object (ReservationNamer) is
// served by it, whatever the object's spec.nodeGroups, and launches only
// onto it unless its template says otherwise.
func TestBookGroupsNamingAReservation(t *testing.T) {
	crd := func(name string, count int, groups ...string) *Reservation {
		return &Reservation{ID: name, Name: name, Origin: SourceCRD, Kind: cloudprovider.ReservationTargeted, NodeGroups: groups, Count: count}
	}
	plain := builder.Node("t").Obj()
	tests := []struct {
		name   string
		res    []*Reservation
		groups []GroupNodes
		// served and left per reservation; reservedOnly per group.
		served       map[string][]string
		left         map[string]int
		reservedOnly map[string]bool
		// available per group, for no pods.
		available map[string]int
	}{{
		name: "the object serves the group naming it, only it",
		res:  []*Reservation{crd("r", 2)},
		groups: []GroupNodes{{ID: "md/reserved", Template: plain, Size: 1, Reservation: "r"},
			{ID: "md/ondemand", Template: plain, Size: 3}},
		served:       map[string][]string{"r": {"md/reserved"}},
		left:         map[string]int{"r": 1},
		reservedOnly: map[string]bool{"md/reserved": true, "md/ondemand": false},
		available:    map[string]int{"md/reserved": 1, "md/ondemand": 0},
	}, {
		name:         "named by both sides, the group is counted once",
		res:          []*Reservation{crd("r", 3, "md/a")},
		groups:       []GroupNodes{{ID: "md/a", Template: plain, Size: 2, Reservation: "r"}},
		served:       map[string][]string{"r": {"md/a"}},
		left:         map[string]int{"r": 1},
		reservedOnly: map[string]bool{"md/a": true},
		available:    map[string]int{"md/a": 1},
	}, {
		name: "groups naming one object share its counter",
		res:  []*Reservation{crd("r", 3)},
		groups: []GroupNodes{{ID: "md/a", Template: plain, Size: 2, Reservation: "r"},
			{ID: "md/b", Template: plain, Size: 2, Reservation: "r"}},
		served:       map[string][]string{"r": {"md/a", "md/b"}},
		left:         map[string]int{"r": 0},
		reservedOnly: map[string]bool{"md/a": true, "md/b": true},
		available:    map[string]int{"md/a": 0, "md/b": 0},
	}, {
		name:         "a provider reservation of the same id is not the object",
		res:          []*Reservation{{ID: "r", Origin: SourceProvider, Kind: cloudprovider.ReservationTargeted, Count: 2}},
		groups:       []GroupNodes{{ID: "md/a", Template: plain, Reservation: "r"}},
		served:       map[string][]string{"r": nil},
		left:         map[string]int{"r": 2},
		reservedOnly: map[string]bool{"md/a": true},
		available:    map[string]int{"md/a": 0},
	}, {
		name:         "a template that says on-demand goes on beyond the reservation",
		res:          []*Reservation{crd("r", 2)},
		groups:       []GroupNodes{{ID: "md/a", Template: tmpl(CapacityOnDemand), Reservation: "r"}},
		served:       map[string][]string{"r": {"md/a"}},
		left:         map[string]int{"r": 2},
		reservedOnly: map[string]bool{"md/a": false},
		available:    map[string]int{"md/a": 2},
	}, {
		name:         "a group without a template still names its reservation",
		res:          []*Reservation{crd("r", 2)},
		groups:       []GroupNodes{{ID: "md/a", Reservation: "r"}},
		served:       map[string][]string{"r": {"md/a"}},
		left:         map[string]int{"r": 2},
		reservedOnly: map[string]bool{"md/a": true},
		available:    map[string]int{"md/a": 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[*Reservation][]string{}
			for _, r := range tc.res {
				before[r] = append([]string(nil), r.NodeGroups...)
			}
			b := NewBook(now, 30*time.Minute, tc.res, tc.groups)
			for _, s := range b.Slots() {
				if got := b.ServedGroups(s); !slices.Equal(got, tc.served[s.ID]) {
					t.Errorf("%s serves %v, want %v", s.ID, got, tc.served[s.ID])
				}
				if got := b.Left(s); got != tc.left[s.ID] {
					t.Errorf("%s has %d left, want %d", s.ID, got, tc.left[s.ID])
				}
			}
			for g, want := range tc.reservedOnly {
				if got := b.ReservedOnly(g); got != want {
					t.Errorf("ReservedOnly(%s) = %v, want %v", g, got, want)
				}
			}
			for g, want := range tc.available {
				if got := b.Available(g, nil); got != want {
					t.Errorf("Available(%s) = %d, want %d", g, got, want)
				}
			}
			for r, groups := range before {
				if !slices.Equal(r.NodeGroups, groups) {
					t.Errorf("the book changed its input: %s names %v, was %v", r.ID, r.NodeGroups, groups)
				}
			}
		})
	}
}

// A group naming an object that is not there launches nowhere, and says
// which object it waits for.
func TestBookWhyNotMissingNamedReservation(t *testing.T) {
	b := NewBook(now, 0, []*Reservation{{ID: "other", Name: "other", Origin: SourceCRD, Kind: cloudprovider.ReservationTargeted, Count: 1}},
		[]GroupNodes{{ID: "md/a", Template: builder.Node("t").Obj(), Reservation: "h100"}})
	if !b.ReservedOnly("md/a") || b.Available("md/a", nil) != 0 {
		t.Fatalf("reserved only %v, available %d; want true, 0", b.ReservedOnly("md/a"), b.Available("md/a", nil))
	}
	if got, want := b.WhyNot("md/a", nil), "it names CapacityReservation h100, which does not exist or is not valid"; got != want {
		t.Errorf("WhyNot = %q, want %q", got, want)
	}
}
