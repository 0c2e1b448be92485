package externalgrpc

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

var statusCM = &corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: "kube-system", Name: "cluster-autoscaler-status"}

// startRecorded serves cp with a valid "cpu" group first and a valid
// reservation "good" of it, and records the client's events.
func startRecorded(t *testing.T, cp *fakeCP) (*env, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	rec.IncludeObject = true
	cp.groups = append([]*fakeGroup{{cp: cp, id: "cpu", max: 5, err: map[string]error{}}}, cp.groups...)
	cp.reservations = append([]cloudprovider.ReservedCapacity{{ID: "good", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"cpu"}, Count: 1}}, cp.reservations...)
	return startWith(t, cp, Config{}, []ProviderOption{WithEvents(rec, statusCM)}), rec
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for len(rec.Events) > 0 {
		out = append(out, <-rec.Events)
	}
	return out
}

func intp(n int) *int { return &n }

// Each kind of bad answer: the bad item is left out with one Warning on
// the status ConfigMap naming the RPC, the group and what was wrong; the
// rest of the answer (the cpu group, the good reservation) is used.
func TestBadAnswersAreEvents(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	badSlice := gpuTemplate("t")
	badSlice.ResourceSlices = append(badSlice.ResourceSlices, builder.ResourceSlice("t-nic", "other", "nic.example.com", "t").Obj())
	shortPool := gpuTemplate("t")
	shortPool.ResourceSlices[0].Spec.Pool.ResourceSliceCount = 2
	for _, tc := range []struct {
		name string
		// setup adds the bad item; act makes the client read it (after a
		// Refresh) and checks what the call returned.
		setup func(cp *fakeCP)
		act   func(t *testing.T, e *env)
		// want is the one event: reason, RPC, then parts of the message.
		want []string
		// wantGroups and wantReservations are what is used afterwards.
		wantGroups       []string
		wantReservations map[string][]string
	}{
		{name: "empty id", setup: func(cp *fakeCP) { cp.add("", 0, 3) },
			want: []string{ReasonInvalidNodeGroup, "NodeGroups", `node group #1 (debug "fake ") has an empty id`}},
		{name: "duplicate id", setup: func(cp *fakeCP) { cp.add("cpu", 1, 1) },
			want: []string{ReasonInvalidNodeGroup, "NodeGroups", `node group "cpu" is listed more than once; the first entry is used`}},
		{name: "negative min", setup: func(cp *fakeCP) { cp.add("neg", -1, 3) },
			want: []string{ReasonInvalidNodeGroup, "NodeGroups", `node group "neg": negative minSize -1; the group is left out of autoscaling`}},
		{name: "negative max", setup: func(cp *fakeCP) { cp.add("neg", 0, -2) },
			want: []string{ReasonInvalidNodeGroup, "NodeGroups", `node group "neg": negative maxSize -2`}},
		{name: "min above max", setup: func(cp *fakeCP) { cp.add("inverted", 3, 2) },
			want: []string{ReasonInvalidNodeGroup, "NodeGroups", `node group "inverted": maxSize 2 below minSize 3`}},
		{name: "negative target size", setup: func(cp *fakeCP) { cp.add("gpu", 0, 3).target = intp(-3) },
			act: func(t *testing.T, e *env) {
				if _, err := e.group(t, "gpu").TargetSize(); !errors.Is(err, cloudprovider.ErrInvalidAnswer) {
					t.Errorf("TargetSize error %v, want ErrInvalidAnswer", err)
				}
			},
			want:       []string{ReasonInvalidNodeGroup, "NodeGroupTargetSize", `node group "gpu": negative target size -3; the group is left out of the pass`},
			wantGroups: []string{"cpu", "gpu"}},
		{name: "template slice of another node", setup: func(cp *fakeCP) { cp.add("gpu", 0, 3).template = badSlice },
			act: func(t *testing.T, e *env) {
				if _, err := e.group(t, "gpu").TemplateNodeInfo(); err == nil {
					t.Error("a template with another node's slice was accepted")
				}
			},
			want:       []string{ReasonInvalidTemplate, "NodeGroupTemplate", `node group "gpu": template rejected: template resource slice "t-nic" does not name the template node "t"`},
			wantGroups: []string{"cpu", "gpu"}},
		{name: "template pool short of slices", setup: func(cp *fakeCP) { cp.add("gpu", 0, 3).template = shortPool },
			act: func(t *testing.T, e *env) {
				if _, err := e.group(t, "gpu").TemplateNodeInfo(); err == nil {
					t.Error("a template with an incomplete pool was accepted")
				}
			},
			want:       []string{ReasonInvalidTemplate, "NodeGroupTemplate", `node group "gpu": template rejected: template pool "t" of driver gpu.example.com: slice "t-gpu" says the pool has 2 slices, the template has 1`},
			wantGroups: []string{"cpu", "gpu"}},
		{name: "node in an unlisted group", setup: func(cp *fakeCP) { cp.ghosts = []*fakeGroup{{cp: cp, id: "ghost"}} },
			act: func(t *testing.T, e *env) {
				for _, n := range []string{"n1", "n2"} { // one event for both
					if g, err := e.p.NodeGroupForNode(builder.Node(n).Label("group", "ghost").Obj()); g != nil || err != nil {
						t.Errorf("NodeGroupForNode = %v, %v; want not managed", g, err)
					}
				}
			},
			want: []string{ReasonUnknownNodeGroup, "NodeGroupForNode", `node group "ghost", answered for the cluster's nodes, is not one NodeGroups listed (validly); its nodes are treated as not managed`}},
		{name: "reservation ending before it starts", setup: func(cp *fakeCP) {
			cp.reservations = append(cp.reservations, cloudprovider.ReservedCapacity{ID: "back", Kind: cloudprovider.ReservationCapacityBlock,
				NodeGroups: []string{"cpu"}, Count: 1, Start: t0, End: t0.Add(-time.Hour)})
		},
			want: []string{ReasonInvalidReservation, "Reservations", `node group "cpu": reservation back: ends (2026-02-28T23:00:00Z) before it starts (2026-03-01T00:00:00Z); the reservation is ignored`}},
		{name: "reservation of negative count", setup: func(cp *fakeCP) {
			cp.reservations = append(cp.reservations, cloudprovider.ReservedCapacity{ID: "neg", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"cpu", "gpu"}, Count: -1})
		},
			want: []string{ReasonInvalidReservation, "Reservations", `node groups "cpu", "gpu": reservation neg: negative count -1`}},
		{name: "reservation listed twice", setup: func(cp *fakeCP) {
			cp.reservations = append(cp.reservations, cloudprovider.ReservedCapacity{ID: "good", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"cpu"}, Count: 9})
		},
			want: []string{ReasonInvalidReservation, "Reservations", `reservation good is listed more than once; the first entry is used`}},
		{name: "reservation of an unlisted group", setup: func(cp *fakeCP) {
			cp.reservations = append(cp.reservations, cloudprovider.ReservedCapacity{ID: "r", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"ghost"}, Count: 1})
		},
			want: []string{ReasonUnknownNodeGroup, "Reservations", `reservation r names node group "ghost", which NodeGroups does not list (validly); the reservation is ignored`}},
		{name: "reservation of a listed and an unlisted group", setup: func(cp *fakeCP) {
			cp.add("gpu", 0, 3)
			cp.reservations = append(cp.reservations, cloudprovider.ReservedCapacity{ID: "r", Kind: cloudprovider.ReservationOpen, NodeGroups: []string{"ghost", "gpu"}, Count: 1})
		},
			want:             []string{ReasonUnknownNodeGroup, "Reservations", `reservation r names node group "ghost"`, `it stays for node group "gpu"`},
			wantGroups:       []string{"cpu", "gpu"},
			wantReservations: map[string][]string{"good": {"cpu"}, "r": {"gpu"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := &fakeCP{}
			tc.setup(cp)
			e, rec := startRecorded(t, cp)
			e.refresh(t)
			if tc.act != nil {
				tc.act(t, e)
			}
			got := drain(rec)
			if len(got) != 1 {
				t.Fatalf("events %q, want one", got)
			}
			prefix := "Warning " + tc.want[0] + " externalgrpc bufnet:1 " + tc.want[1] + ": "
			if !strings.HasPrefix(got[0], prefix) || !strings.HasSuffix(got[0], "involvedObject{kind=ConfigMap,apiVersion=v1}") {
				t.Errorf("event %q, want %q... on the ConfigMap", got[0], prefix)
			}
			for _, part := range tc.want[2:] {
				if !strings.Contains(got[0], part) {
					t.Errorf("event %q does not say %q", got[0], part)
				}
			}
			wantGroups := tc.wantGroups
			if wantGroups == nil {
				wantGroups = []string{"cpu"}
			}
			if ids := groupIDs(e.p.NodeGroups()); !slices.Equal(ids, wantGroups) {
				t.Errorf("groups %v, want %v", ids, wantGroups)
			}
			wantRes := tc.wantReservations
			if wantRes == nil {
				wantRes = map[string][]string{"good": {"cpu"}}
			}
			rs, err := e.p.Reservations()
			if err != nil {
				t.Fatal(err)
			}
			gotRes := map[string][]string{}
			for _, r := range rs {
				gotRes[r.ID] = r.NodeGroups
			}
			if len(gotRes) != len(wantRes) {
				t.Errorf("reservations %v, want %v", gotRes, wantRes)
			}
			for id, groups := range wantRes {
				if !slices.Equal(gotRes[id], groups) {
					t.Errorf("reservation %s of %v, want %v", id, gotRes[id], groups)
				}
			}
		})
	}
}

func groupIDs(gs []cloudprovider.NodeGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Id())
	}
	return out
}

// A bad answer is told once while it lasts, again when its message
// changes, and again when it comes back after a fix.
func TestBadAnswersToldOnce(t *testing.T) {
	cp := &fakeCP{}
	inverted := cp.add("inverted", 3, 2)
	gpu := cp.add("gpu", 0, 3)
	gpu.target = intp(-1)
	e, rec := startRecorded(t, cp)
	pass := func() {
		t.Helper()
		e.refresh(t)
		_, _ = e.group(t, "gpu").TargetSize()
	}
	check := func(what string, want ...string) {
		t.Helper()
		got := drain(rec)
		if len(got) != len(want) {
			t.Fatalf("%s: events %q, want %d", what, got, len(want))
		}
		for i := range want {
			if !strings.Contains(got[i], want[i]) {
				t.Errorf("%s: event %q, want %q", what, got[i], want[i])
			}
		}
	}
	for range 3 {
		pass()
	}
	check("three passes", "maxSize 2 below minSize 3", "negative target size -1")
	inverted.min = 4
	gpu.target = intp(-2)
	pass()
	check("changed", "maxSize 2 below minSize 4", "negative target size -2")
	inverted.min, gpu.target = 0, intp(0)
	pass()
	check("fixed")
	inverted.min, gpu.target = 4, intp(-2)
	pass()
	check("back", "maxSize 2 below minSize 4", "negative target size -2")
}

// No more than eventBurst new events per eventWindow; the ones held back
// are told in the next window.
func TestWarnerLimit(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	w := newWarner()
	w.rec, w.obj, w.clock = rec, statusCM, clk
	warnAll := func() {
		for i := range eventBurst + 2 {
			w.warn("a:1", "NodeGroups", positionSubject(i), ReasonInvalidNodeGroup, positionSubject(i))
		}
	}
	warnAll()
	if n := len(drain(rec)); n != eventBurst {
		t.Fatalf("%d events in one window, want %d", n, eventBurst)
	}
	clk.SetTime(clk.Now().Add(eventWindow - time.Second))
	warnAll()
	if n := len(drain(rec)); n != 0 {
		t.Fatalf("%d events before the window ended", n)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	warnAll()
	if got := drain(rec); len(got) != 2 || !strings.HasSuffix(got[0], "#10") || !strings.HasSuffix(got[1], "#11") {
		t.Fatalf("next window: %q, want the two held back", got)
	}
}
