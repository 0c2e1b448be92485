package clusterapi

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
)

func TestInstances(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	status := func(s cloudprovider.InstanceState, info *cloudprovider.InstanceErrorInfo) *cloudprovider.InstanceStatus {
		return &cloudprovider.InstanceStatus{State: s, ErrorInfo: info}
	}
	oor := func(code, msg string) *cloudprovider.InstanceErrorInfo {
		return &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OutOfResourcesErrorClass, ErrorCode: code, ErrorMessage: msg}
	}
	other := func(code, msg string) *cloudprovider.InstanceErrorInfo {
		return &cloudprovider.InstanceErrorInfo{ErrorClass: cloudprovider.OtherErrorClass, ErrorCode: code, ErrorMessage: msg}
	}
	for _, tc := range []struct {
		name    string
		machine *obj
		want    cloudprovider.Instance
	}{
		{name: "running", machine: machine("m").providerID("aws:///a/i-1").node("n"),
			want: cloudprovider.Instance{Id: "aws:///a/i-1", Status: status(cloudprovider.InstanceRunning, nil)}},
		{name: "no providerID yet: a pending id", machine: machine("m"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, nil)}},
		{name: "provisioned, no Node yet", machine: machine("m").providerID("aws:///a/i-1"),
			want: cloudprovider.Instance{Id: "aws:///a/i-1", Status: status(cloudprovider.InstanceCreating, nil)}},
		{name: "still provisioning is no error", machine: machine("m").condition("InfrastructureReady", "False", "NotProvisioned", "TestMachine status.initialization.provisioned is false"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, nil)}},
		{name: "deleting", machine: machine("m").providerID("aws:///a/i-1").node("n").deleting(),
			want: cloudprovider.Instance{Id: "aws:///a/i-1", Status: status(cloudprovider.InstanceDeleting, nil)}},
		// What Cluster API v1.14 writes for an infrastructure out of capacity (tested against the real controllers).
		{name: "v1beta2 out of capacity", machine: machine("m").
			set("InsufficientCapacity", "status", "deprecated", "v1beta1", "failureReason").
			set(`Failure detected from referenced resource infrastructure.test.dra-autoscaler.io/v1alpha1, Kind=TestMachine with name "m": out of capacity`, "status", "deprecated", "v1beta1", "failureMessage").
			condition("InfrastructureReady", "False", "OutOfCapacity", "out of capacity in zone a"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, oor("InsufficientCapacity",
				`Failure detected from referenced resource infrastructure.test.dra-autoscaler.io/v1alpha1, Kind=TestMachine with name "m": out of capacity`))}},
		{name: "only the mirrored condition says out of capacity", machine: machine("m").condition("InfrastructureReady", "False", "OutOfCapacity", "no GPUs left"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, oor("OutOfCapacity", "no GPUs left"))}},
		{name: "a cloud's capacity error in the message", machine: machine("m").set("CreateError", "status", "deprecated", "v1beta1", "failureReason").
			set("InsufficientInstanceCapacity: We currently do not have sufficient p5.48xlarge capacity", "status", "deprecated", "v1beta1", "failureMessage"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, oor("CreateError",
				"InsufficientInstanceCapacity: We currently do not have sufficient p5.48xlarge capacity"))}},
		{name: "v1beta1 failure fields, not capacity", machine: capi("v1beta1", kindMachine, "m").set("InvalidConfiguration", "status", "failureReason").
			set("bad AMI", "status", "failureMessage").set("Failed", "status", "phase"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, other("InvalidConfiguration", "bad AMI"))}},
		{name: "v1beta1 phase Failed alone", machine: capi("v1beta1", kindMachine, "m").set("Failed", "status", "phase"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, other("ProvisioningFailed", "Machine team/m failed (phase Failed)"))}},
		{name: "v1beta1 keeps new conditions under status.v1beta2", machine: capi("v1beta1", kindMachine, "m").
			set([]any{map[string]any{"type": "InfrastructureReady", "status": "False", "reason": "InsufficientCapacity", "message": "full"}}, "status", "v1beta2", "conditions"),
			want: cloudprovider.Instance{Id: pendingPrefix + "team/m", Status: status(cloudprovider.InstanceCreating, oor("InsufficientCapacity", "full"))}},
		{name: "a failure after the Node came is not a creation error", machine: machine("m").providerID("aws:///a/i-1").node("n").
			set("InsufficientCapacity", "status", "deprecated", "v1beta1", "failureReason"),
			want: cloudprovider.Instance{Id: "aws:///a/i-1", Status: status(cloudprovider.InstanceRunning, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.machine.created(t0).u
			tc.want.CreatedAt = t0
			if diff := cmp.Diff(tc.want, instance(m)); diff != "" {
				t.Fatalf("instance (-want +got):\n%s", diff)
			}
		})
	}
}

// Nodes lists a group's Machines only, and a MachinePool's providerIDs no
// Machine stands for.
func TestNodes(t *testing.T) {
	e := newEnv(t, nil, md("gpu").size(0, 5), md("cpu").size(0, 5),
		machine("g1").of("gpu").providerID("test:///g1").node("g1"), machine("g2").of("gpu"),
		machine("c1").of("cpu").providerID("test:///c1"),
		mp("pool").size(0, 3).set([]any{"test:///p1", "test:///p2"}, "spec", "providerIDList"),
		machine("p1").label("cluster.x-k8s.io/pool-name", "pool").providerID("test:///p1").node("p1"))
	for id, want := range map[string][]string{
		gpuGroup:                     {"test:///g1", pendingPrefix + "team/g2"},
		"MachineDeployment/team/cpu": {"test:///c1"},
		"MachinePool/team/pool":      {"test:///p1", "test:///p2"},
	} {
		got, err := e.group(id).Nodes()
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []string
		for _, in := range got {
			gotIDs = append(gotIDs, in.Id)
		}
		if diff := cmp.Diff(want, gotIDs); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
}

func TestCapacityShortage(t *testing.T) {
	for s, want := range map[string]bool{
		"InsufficientCapacity": true, "OutOfCapacity": true, "out of capacity": true, "Insufficient capacity in zone": true,
		"ZONE_RESOURCE_POOL_EXHAUSTED": true, "SkuNotAvailable": true, "InsufficientInstanceCapacity": true,
		"NotProvisioned": false, "WaitingForInfrastructure": false, "": false, "capacity reservation expired": false,
	} {
		if got := capacityShortage(s); got != want {
			t.Errorf("capacityShortage(%q) = %v, want %v", s, got, want)
		}
	}
}
