package clusterapi

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

// machineID is the instance id of a Machine: its providerID once the
// infrastructure provider set one (what the Node will carry), else a
// pending id naming the Machine.
func machineID(m *unstructured.Unstructured) string {
	if pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); pid != "" {
		return pid
	}
	return pendingID(m)
}

func hasNode(m *unstructured.Unstructured) bool {
	name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	return name != ""
}

func deleting(m *unstructured.Unstructured) bool { return m.GetDeletionTimestamp() != nil }

// instance is the Machine as the autoscaler sees it: Deleting once it has
// a deletionTimestamp, Running once it has a Node, else Creating, with an
// error when its creation failed. CreatedAt is the Machine's creation.
func instance(m *unstructured.Unstructured) cloudprovider.Instance {
	in := cloudprovider.Instance{Id: machineID(m), CreatedAt: m.GetCreationTimestamp().Time}
	switch {
	case deleting(m):
		in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	case hasNode(m):
		in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	default:
		in.Status = &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: creationError(m)}
	}
	return in
}

// condition is the part of a Cluster API condition (v1beta2's
// metav1.Condition or v1beta1's clusterv1.Condition) we read.
type condition struct{ status, reason, message string }

// conditionOf finds a condition by type in status.conditions, then in
// status.v1beta2.conditions (where v1beta1 objects keep the new ones).
func conditionOf(m *unstructured.Unstructured, typ string) (condition, bool) {
	for _, path := range [][]string{{"status", "conditions"}, {"status", "v1beta2", "conditions"}} {
		list, _, _ := unstructured.NestedSlice(m.Object, path...)
		for _, item := range list {
			c, ok := item.(map[string]any)
			if !ok || c["type"] != typ {
				continue
			}
			str := func(k string) string { s, _ := c[k].(string); return s }
			return condition{status: str("status"), reason: str("reason"), message: str("message")}, true
		}
	}
	return condition{}, false
}

// failure is a Machine's terminal failure: v1beta2 keeps it under
// status.deprecated.v1beta1 (Cluster API v1.14 never sets phase Failed),
// v1beta1 at status.failureReason/failureMessage.
func failure(m *unstructured.Unstructured) (reason, message string) {
	for _, base := range [][]string{{"status", "deprecated", "v1beta1"}, {"status"}} {
		r, _, _ := unstructured.NestedString(m.Object, append(append([]string{}, base...), "failureReason")...)
		msg, _, _ := unstructured.NestedString(m.Object, append(append([]string{}, base...), "failureMessage")...)
		if r != "" || msg != "" {
			return r, msg
		}
	}
	return "", ""
}

// creationError says why a Machine without a Node will not get one: a
// failure reason or message, phase Failed (v1beta1), or an
// InfrastructureReady=False condition whose reason or message says the
// infrastructure is out of capacity. A machine still provisioning
// (InfrastructureReady=False for any other reason) has none. Capacity
// shortages are OutOfResources (the autoscaler tries another group), the
// rest OtherErrorClass.
func creationError(m *unstructured.Unstructured) *cloudprovider.InstanceErrorInfo {
	reason, message := failure(m)
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	infra, _ := conditionOf(m, "InfrastructureReady")
	infraCapacity := infra.status == "False" && (capacityShortage(infra.reason) || capacityShortage(infra.message))
	if reason == "" && message == "" && phase != "Failed" && !infraCapacity {
		return nil
	}
	info := &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: reason, ErrorMessage: message}
	if capacityShortage(reason) || capacityShortage(message) || infraCapacity {
		info.ErrorClass = cloudprovider.OutOfResourcesErrorClass
	}
	if info.ErrorCode == "" {
		info.ErrorCode = infra.reason
	}
	if info.ErrorCode == "" {
		info.ErrorCode = "ProvisioningFailed"
	}
	if info.ErrorMessage == "" {
		info.ErrorMessage = infra.message
	}
	if info.ErrorMessage == "" {
		info.ErrorMessage = "Machine " + m.GetNamespace() + "/" + m.GetName() + " failed (phase " + phase + ")"
	}
	return info
}

// capacityShortages are the words (lower-case, without spaces, dashes or
// underscores) with which Cluster API and infrastructure providers say a
// machine could not be had: Cluster API's InsufficientCapacity, the
// OutOfCapacity condition reason, AWS's InsufficientInstanceCapacity,
// GCE's ZONE_RESOURCE_POOL_EXHAUSTED, Azure's SkuNotAvailable.
var capacityShortages = []string{"insufficientcapacity", "outofcapacity", "insufficientinstancecapacity",
	"outofresources", "zoneresourcepoolexhausted", "skunotavailable"}

func capacityShortage(s string) bool {
	s = strings.NewReplacer(" ", "", "-", "", "_", "").Replace(strings.ToLower(s))
	for _, w := range capacityShortages {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
