package capi

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Machine is what a test reads of a Cluster API Machine.
type Machine struct {
	Name       string
	Phase      string // Pending, Provisioning, Provisioned, Running, Deleting, ...
	ProviderID string
	NodeName   string // status.nodeRef.name
	Deleting   bool
	// DeleteMarked: the delete-machine annotation is set.
	DeleteMarked bool
	// InfrastructureReady is the Machine's v1beta2 condition (status and
	// reason; the message of a failure comes from the infrastructure).
	InfraReadyStatus, InfraReadyReason, InfraReadyMessage string
	// FailureReason/FailureMessage: status.deprecated.v1beta1 (v1beta2 has
	// no top-level failure fields).
	FailureReason, FailureMessage string
}

// MachineOf reads a Machine object.
func MachineOf(u *unstructured.Unstructured) Machine {
	str := func(path ...string) string { s, _, _ := unstructured.NestedString(u.Object, path...); return s }
	m := Machine{
		Name:           u.GetName(),
		Phase:          str("status", "phase"),
		ProviderID:     str("spec", "providerID"),
		NodeName:       str("status", "nodeRef", "name"),
		Deleting:       u.GetDeletionTimestamp() != nil,
		FailureReason:  str("status", "deprecated", "v1beta1", "failureReason"),
		FailureMessage: str("status", "deprecated", "v1beta1", "failureMessage"),
	}
	_, m.DeleteMarked = u.GetAnnotations()[DeleteMachineAnnotation]
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if c, ok := c.(map[string]any); ok && c["type"] == "InfrastructureReady" {
			m.InfraReadyStatus, _ = c["status"].(string)
			m.InfraReadyReason, _ = c["reason"].(string)
			m.InfraReadyMessage, _ = c["message"].(string)
		}
	}
	return m
}

// Machines reads a list of Machine objects, sorted by name.
func Machines(list []unstructured.Unstructured) []Machine {
	out := make([]Machine, 0, len(list))
	for i := range list {
		out = append(out, MachineOf(&list[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Summary is one line per Machine, for wait messages.
func Summary(ms []Machine) string {
	if len(ms) == 0 {
		return "no machines"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		s := fmt.Sprintf("%s phase=%s node=%q", m.Name, m.Phase, m.NodeName)
		if m.InfraReadyStatus != "True" {
			s += fmt.Sprintf(" infraReady=%s/%s", m.InfraReadyStatus, m.InfraReadyReason)
		}
		if m.FailureReason != "" {
			s += " failure=" + m.FailureReason
		}
		if m.Deleting {
			s += " deleting"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}
