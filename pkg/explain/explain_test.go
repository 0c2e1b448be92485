package explain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
