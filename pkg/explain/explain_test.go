package explain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestWrite(t *testing.T) {
	r := &Report{Pod: "ns/p", State: "Unschedulable", Summary: "no node group can help",
		SchedulerMessage: "0/1 nodes are available",
		NodeGroups: []GroupVerdict{
			{NodeGroup: "gpu", Verdict: VerdictCannotHelp, Reason: "DynamicResources", Message: "cannot allocate\n all claims",
				Constraint: "matchAttribute resource.kubernetes.io/pcieRoot of claim accel"},
			{NodeGroup: "cpu", Verdict: VerdictCannotHelp, Reason: "max-nodes-total", Message: "room for 0 more node(s)"},
		}}
	var table bytes.Buffer
	if err := Write(&table, r, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NODE GROUP", "gpu", "DynamicResources", "matchAttribute resource.kubernetes.io/pcieRoot of claim accel",
		"cannot allocate all claims", "max-nodes-total", "Scheduler:  0/1 nodes are available"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := Write(&js, r, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	if err := Write(&js, r, "yaml"); err == nil {
		t.Error("unknown format accepted")
	}
}

// A gang's domains and members: the chosen domain is marked, the others
// say what they lacked; members on existing nodes by name, on new nodes
// by their place in the group's scale-up; the table shows both.
func TestGangDomainsAndMembers(t *testing.T) {
	pods := []*corev1.Pod{builder.Pod("ns", "m0").Obj(), builder.Pod("ns", "m1").Obj(), builder.Pod("ns", "m2").Obj()}
	g := &nodegroups.Info{Id: "rack-b"}
	o := plan.GangOutcome{Gang: &gang.Gang{Namespace: "ns", Name: "train", Pending: pods}, Domain: "b",
		Existing: map[*corev1.Pod]string{pods[0]: "node-1"},
		ScaleUps: []act.ScaleUp{{Group: g, Delta: 2, Nodes: [][]*corev1.Pod{{pods[1]}, {pods[2]}}}},
		Tried: []plan.DomainTry{{Domain: "a", Message: "needs 2 more member(s)"}, {Domain: "b", Feasible: true, Message: "score 80"},
			{Domain: "c", Feasible: true, Message: "score 60"}}}
	r := &Report{Pod: "ns/m0", Summary: "the gang triggers a scale-up", GangDomains: gangDomains(o), GangMembers: gangMembers(o)}
	want := []DomainVerdict{{Domain: "a", Verdict: DomainCannotHost, Message: "needs 2 more member(s)"},
		{Domain: "b", Verdict: DomainChosen, Message: "score 80"}, {Domain: "c", Verdict: DomainFeasible, Message: "score 60"}}
	if diff := cmp.Diff(want, r.GangDomains); diff != "" {
		t.Errorf("domains (-want +got):\n%s", diff)
	}
	wantMembers := []MemberPlacement{{Pod: "ns/m0", Node: "node-1"}, {Pod: "ns/m1", Node: "new node 1 of 2 in rack-b"},
		{Pod: "ns/m2", Node: "new node 2 of 2 in rack-b"}}
	if diff := cmp.Diff(wantMembers, r.GangMembers); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	var table bytes.Buffer
	if err := Write(&table, r, "table"); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"domain:   a CannotHost: needs 2 more member(s)", "domain:   b Chosen: score 80", "member:   ns/m2 on new node 2 of 2 in rack-b"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, table.String())
		}
	}
	// Without a topology key there is one domain, named "": none is shown.
	if d := gangDomains(plan.GangOutcome{Gang: o.Gang, Tried: []plan.DomainTry{{Feasible: true}}}); d != nil {
		t.Errorf("domains without a topology key: %+v", d)
	}
}
