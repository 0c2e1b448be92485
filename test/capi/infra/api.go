// Package infra is a tiny Cluster API infrastructure provider for tests: its
// machines become kwok Nodes of the local control plane, with the labels,
// capacity, taints and ResourceSlices their template declares, so the real
// Cluster API controllers (test/controlplane StartCAPIManager), the real
// scheduler and the autoscaler all see what a cloud would give them.
//
// Kinds (v1alpha1, CRDs in crds/, labelled with the v1beta2 contract):
//   - DevMachine / DevMachineTemplate (infrastructure.test.dra-autoscaler.io):
//     the InfraMachine contract (spec.providerID,
//     status.initialization.provisioned, failureReason/failureMessage and a
//     Ready condition on failure); the template publishes status.capacity and
//     status.nodeInfo for scale from zero.
//   - DevMachinePool: the InfraMachinePool contract (spec.providerIDList,
//     status.replicas, status.ready), one Node per replica of its MachinePool.
//   - DevControlPlane (controlplane.test.dra-autoscaler.io): an externally
//     managed control plane that is initialized at once, so Cluster API treats
//     the cluster as up and deletes Nodes on scale-down.
//
// Faults (FaultAnnotation, BootDelayAnnotation on a DevMachine or, read live,
// on the DevMachineTemplate it was cloned from; else spec.fault/bootDelay):
// NeverProvision, OutOfCapacity, NeverReady, and a boot delay.
package infra

import (
	"context"
	"embed"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

const (
	// Group is the API group of the machine kinds; ControlPlaneGroup that
	// of DevControlPlane.
	Group             = "infrastructure.test.dra-autoscaler.io"
	ControlPlaneGroup = "controlplane.test.dra-autoscaler.io"
	Version           = "v1alpha1"

	KindMachine         = "DevMachine"
	KindMachineTemplate = "DevMachineTemplate"
	KindMachinePool     = "DevMachinePool"
	KindControlPlane    = "DevControlPlane"
)

var (
	MachineResource         = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "devmachines"}
	MachineTemplateResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "devmachinetemplates"}
	MachinePoolResource     = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "devmachinepools"}
	ControlPlaneResource    = schema.GroupVersionResource{Group: ControlPlaneGroup, Version: Version, Resource: "devcontrolplanes"}
)

// Fault is how a machine misbehaves.
type Fault string

const (
	// NoFault: the machine provisions (after its boot delay) and its Node
	// becomes Ready.
	NoFault Fault = ""
	// NeverProvision: no providerID, provisioned stays false; the Machine
	// stays Pending. Re-read while pending: clearing it lets the machine boot.
	NeverProvision Fault = "NeverProvision"
	// OutOfCapacity: failureReason InsufficientCapacity and Ready=False
	// reason OutOfCapacity, as a cloud without stock reports it. Final.
	OutOfCapacity Fault = "OutOfCapacity"
	// NeverReady: provisioned, and the Node registers but stays NotReady
	// (kwok does not manage it).
	NeverReady Fault = "NeverReady"
)

const (
	// FaultAnnotation overrides spec.fault (value: a Fault).
	FaultAnnotation = Group + "/fault"
	// BootDelayAnnotation overrides spec.bootDelay (a Go duration): the time
	// from the DevMachine's creation until it provisions.
	BootDelayAnnotation = Group + "/boot-delay"
	// PublishCapacityAnnotation "false" on a DevMachineTemplate keeps its
	// status.capacity/nodeInfo empty, for tests of annotation-only scale
	// from zero.
	PublishCapacityAnnotation = Group + "/publish-capacity"
	// OwnerLabel on Nodes and ResourceSlices is the UID of the DevMachine or
	// DevMachinePool they belong to.
	OwnerLabel = Group + "/owner-uid"
	// Finalizer keeps a DevMachine/DevMachinePool until its Nodes and slices
	// are gone.
	Finalizer = Group + "/cleanup"
	// ProviderIDPrefix starts every providerID this provider sets
	// ("dev:///<namespace>/<machine>").
	ProviderIDPrefix = "dev:///"
	// FailureReasonInsufficientCapacity is the failureReason of OutOfCapacity
	// and ReasonOutOfCapacity the Ready condition's reason.
	FailureReasonInsufficientCapacity = "InsufficientCapacity"
	ReasonOutOfCapacity               = "OutOfCapacity"
)

// MachineSpec is the spec of a DevMachine and the spec.template.spec of a
// DevMachineTemplate / DevMachinePool: the shape of the Node it becomes.
type MachineSpec struct {
	// ProviderID is set by the controller once the machine is provisioned.
	ProviderID string `json:"providerID,omitempty"`
	// Capacity of the Node (also its allocatable), e.g. cpu, memory, pods.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Labels and Taints of the Node.
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
	// NodeInfo gives the Node's architecture and OS (default amd64/linux).
	NodeInfo *NodeInfo `json:"nodeInfo,omitempty"`
	// KubeletVersion the Node reports; Cluster API compares it with the
	// Machine's spec.version (default: the controller's).
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	// ResourceSlices the node's DRA drivers publish. The controller sets
	// nodeName (unless the slice selects nodes otherwise), the pool name
	// (the node name, plus "-<pool>" if one is given), its generation and
	// resourceSliceCount.
	ResourceSlices []resourceapi.ResourceSliceSpec `json:"resourceSlices,omitempty"`
	// Fault and BootDelay (a Go duration), see the annotations.
	Fault     Fault  `json:"fault,omitempty"`
	BootDelay string `json:"bootDelay,omitempty"`
}

// NodeInfo is the template's status.nodeInfo of Cluster API's
// autoscaling-from-zero contract.
type NodeInfo struct {
	Architecture    string `json:"architecture,omitempty"`
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the CRDs of this provider's kinds.
func CRDs() ([]*unstructured.Unstructured, error) {
	entries, err := crdFiles.ReadDir("crds")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		data, err := crdFiles.ReadFile(path.Join("crds", e.Name()))
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return nil, fmt.Errorf("crds/%s: %w", e.Name(), err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// InstallCRDs creates this provider's CRDs unless they exist and returns
// their names (wait with controlplane.WaitCRDsEstablished).
func InstallCRDs(ctx context.Context, client dynamic.Interface) ([]string, error) {
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	var names []string
	res := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, crd := range crds {
		if _, err := client.Resource(res).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("installing CRD %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	return names, nil
}
