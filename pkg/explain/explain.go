// Package explain is the answer to "why is my pod Pending?": for one pod,
// what the scheduler said, whether the simulation fits it on a node that
// exists, and per node group whether a new node would take it and, if
// not, the scheduler plugin (and the claim constraint) or the limit that
// stops it. Printed as a table per node group, or as JSON.
package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Verdicts of a node group for the pod.
const (
	VerdictScaleUp    = "scale-up"
	VerdictCannotHelp = "cannot-help"
	VerdictNotNeeded  = "not-needed"
	// VerdictIgnored: the loop leaves the pod alone (see Report.State), so
	// nothing is added; the message says what would be if it were pending.
	VerdictIgnored = "ignored"
)

// Report is the explanation of one pod.
type Report struct {
	Pod string `json:"pod"`
	// State is Scheduled, Pending (not tried by the scheduler yet),
	// Unschedulable, or Ignored (the autoscaler leaves the pod alone).
	State string `json:"state"`
	// Node is where the pod is bound (Scheduled) or where the simulation
	// places it on capacity that exists or is coming.
	Node string `json:"node,omitempty"`
	// SchedulerMessage is the scheduler's PodScheduled condition message.
	SchedulerMessage string `json:"schedulerMessage,omitempty"`
	// Summary is the answer in one sentence.
	Summary string `json:"summary"`
	// ExistingNodes summarises the simulation on the existing and coming
	// nodes: "0/3 nodes fit: 2 NodeResourcesFit, 1 TaintToleration".
	ExistingNodes string `json:"existingNodes,omitempty"`
	// Gang names the pod's gang and what was decided for it.
	Gang string `json:"gang,omitempty"`
	// GangDomains are the topology domains tried for the gang, in the
	// order tried, and what each could do or lacked.
	GangDomains []DomainVerdict `json:"gangDomains,omitempty"`
	// GangMembers say where the plan puts each pending member of the gang
	// (what its nomination names): an existing or coming node, or the
	// i-th new node of a group's scale-up.
	GangMembers []MemberPlacement `json:"gangMembers,omitempty"`
	NodeGroups  []GroupVerdict    `json:"nodeGroups"`
}

// Verdicts of a gang's topology domain.
const (
	DomainChosen     = "Chosen"
	DomainFeasible   = "Feasible"
	DomainCannotHost = "CannotHost"
)

// DomainVerdict is one topology domain tried for a gang.
type DomainVerdict struct {
	Domain  string `json:"domain"`
	Verdict string `json:"verdict"`
	Message string `json:"message,omitempty"`
}

// MemberPlacement is where the plan puts one pending member of a gang.
type MemberPlacement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// GroupVerdict is one node group's answer.
type GroupVerdict struct {
	NodeGroup string `json:"nodeGroup"`
	Verdict   string `json:"verdict"`
	// Reason is the scheduler plugin that rejects the pod on the group's
	// template node or the limit that stops the group (max-nodes-total,
	// node-group-max-size, backoff, ...).
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
	Constraint string `json:"constraint,omitempty"`
}

// Write prints r as "table" or "json".
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "table", "":
		return writeTable(w, r)
	default:
		return fmt.Errorf("output format %q: want table or json", format)
	}
}

func writeTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "Pod:        %s\n", r.Pod)
	fmt.Fprintf(w, "State:      %s\n", r.State)
	if r.Node != "" {
		fmt.Fprintf(w, "Node:       %s\n", r.Node)
	}
	if r.SchedulerMessage != "" {
		fmt.Fprintf(w, "Scheduler:  %s\n", r.SchedulerMessage)
	}
	if r.ExistingNodes != "" {
		fmt.Fprintf(w, "Existing:   %s\n", r.ExistingNodes)
	}
	if r.Gang != "" {
		fmt.Fprintf(w, "Gang:       %s\n", r.Gang)
	}
	for _, d := range r.GangDomains {
		line := fmt.Sprintf("%s %s", d.Domain, d.Verdict)
		if d.Message != "" {
			line += ": " + oneLine(d.Message)
		}
		fmt.Fprintf(w, "  domain:   %s\n", line)
	}
	for _, m := range r.GangMembers {
		fmt.Fprintf(w, "  member:   %s on %s\n", m.Pod, m.Node)
	}
	fmt.Fprintf(w, "Summary:    %s\n\n", r.Summary)
	if len(r.NodeGroups) == 0 {
		_, err := fmt.Fprintln(w, "No node groups.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE GROUP\tVERDICT\tREASON\tCONSTRAINT\tMESSAGE")
	for _, g := range r.NodeGroups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", g.NodeGroup, g.Verdict, dash(g.Reason), dash(g.Constraint), dash(oneLine(g.Message)))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
