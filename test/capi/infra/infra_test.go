package infra

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

func TestBuildNode(t *testing.T) {
	spec := MachineSpec{
		ProviderID: "dev:///ns/m1",
		Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		Labels:     map[string]string{"pool": "gpu", corev1.LabelArchStable: "overridden"},
		NodeInfo:   &NodeInfo{Architecture: "arm64"},
	}
	cases := []struct {
		name     string
		spec     MachineSpec
		notReady bool
		kubelet  string
		arch     string
	}{
		{name: "ready", spec: spec, kubelet: "v1.37.2", arch: "overridden"},
		{name: "never ready", spec: spec, notReady: true, kubelet: "v1.37.2", arch: "overridden"},
		{name: "own kubelet version", spec: MachineSpec{KubeletVersion: "v1.36.0"}, kubelet: "v1.36.0", arch: "amd64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := BuildNode("m1", "uid-1", tc.spec, "v1.37.2", tc.notReady)
			_, kwok := n.Annotations[controlplane.KwokNodeAnnotation]
			if kwok == tc.notReady {
				t.Errorf("kwok annotation %v, want %v", kwok, !tc.notReady)
			}
			if tc.notReady && (len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != corev1.ConditionFalse) {
				t.Errorf("conditions %v, want Ready=False", n.Status.Conditions)
			}
			if n.Status.NodeInfo.KubeletVersion != tc.kubelet || n.Labels[corev1.LabelArchStable] != tc.arch {
				t.Errorf("kubelet %q arch %q, want %q %q", n.Status.NodeInfo.KubeletVersion, n.Labels[corev1.LabelArchStable], tc.kubelet, tc.arch)
			}
			if n.Labels[OwnerLabel] != "uid-1" || n.Labels[corev1.LabelHostname] != "m1" || n.Spec.ProviderID != tc.spec.ProviderID {
				t.Errorf("labels %v providerID %q", n.Labels, n.Spec.ProviderID)
			}
			if pods := n.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 110 {
				t.Errorf("pods %s, want the default 110", pods.String())
			}
		})
	}
}

func TestBuildSlices(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid", Labels: map[string]string{OwnerLabel: "m-uid"}}}
	gpu := resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Devices: []resourceapi.Device{{Name: "gpu-0"}}}
	counters := resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", SharedCounters: []resourceapi.CounterSet{{Name: "c"}}}
	nic := resourceapi.ResourceSliceSpec{Driver: "nic.example.com", Pool: resourceapi.ResourcePool{Name: "nics"}}
	net := resourceapi.ResourceSliceSpec{Driver: "net.example.com", Pool: resourceapi.ResourcePool{Name: "fabric"}, AllNodes: ptr.To(true)}
	slices := BuildSlices(node, MachineSpec{ResourceSlices: []resourceapi.ResourceSliceSpec{gpu, counters, nic, net}})
	want := []struct {
		name, pool string
		count      int64
		nodeName   *string
	}{
		{"n1-0", "n1", 2, ptr.To("n1")},
		{"n1-1", "n1", 2, ptr.To("n1")},
		{"n1-2", "n1-nics", 1, ptr.To("n1")},
		{"n1-3", "fabric", 1, nil},
	}
	if len(slices) != len(want) {
		t.Fatalf("%d slices, want %d", len(slices), len(want))
	}
	for i, w := range want {
		s := slices[i]
		if s.Name != w.name || s.Spec.Pool.Name != w.pool || s.Spec.Pool.ResourceSliceCount != w.count || s.Spec.Pool.Generation != 1 ||
			!ptr.Equal(s.Spec.NodeName, w.nodeName) {
			t.Errorf("slice %d: name %s pool %s/%d/%d node %v, want %+v", i, s.Name, s.Spec.Pool.Name, s.Spec.Pool.Generation,
				s.Spec.Pool.ResourceSliceCount, ptr.Deref(s.Spec.NodeName, "<nil>"), w)
		}
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "node-uid" || s.Labels[OwnerLabel] != "m-uid" || s.Labels[NodeLabel] != "n1" {
			t.Errorf("slice %d: owners %v labels %v", i, s.OwnerReferences, s.Labels)
		}
	}
	if gpu.NodeName != nil || gpu.Pool.Name != "" {
		t.Error("BuildSlices changed the template's spec")
	}
}

func devMachine(spec map[string]any, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(Group + "/" + Version)
	u.SetKind(KindMachine)
	u.SetNamespace("ns")
	u.SetName("m1")
	u.SetUID("m-uid")
	u.SetFinalizers([]string{Finalizer})
	u.SetAnnotations(annotations)
	u.SetCreationTimestamp(metav1.Now())
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m1", UID: "machine-uid"}})
	return u
}

// TestReconcileMachine drives one reconcile of a DevMachine against fake
// clients and checks what it did to the Node and the machine's status.
func TestReconcileMachine(t *testing.T) {
	shape := map[string]any{"capacity": map[string]any{"cpu": "4"}}
	cases := []struct {
		name        string
		spec        map[string]any
		annotations map[string]string
		template    map[string]string // annotations of the DevMachineTemplate the machine was cloned from
		existing    *corev1.Node      // a Node already there under the machine's name
		wantNode    bool
		wantKwok    bool
		wantFailure string // status.failureReason
		wantReady   string // status of the Ready condition, "" if none
		wantRequeue bool
		wantErr     string
		orphan      bool // no Machine has adopted it
	}{
		{name: "provisions", spec: shape, wantNode: true, wantKwok: true, wantReady: "True"},
		{name: "no Machine owns it yet", spec: shape, orphan: true},
		{name: "never provisions", spec: shape, annotations: map[string]string{FaultAnnotation: string(NeverProvision)}},
		{name: "template's live fault", spec: shape, template: map[string]string{FaultAnnotation: string(OutOfCapacity)},
			wantFailure: FailureReasonInsufficientCapacity, wantReady: "False"},
		{name: "machine's annotation beats the template's", spec: shape,
			template:    map[string]string{FaultAnnotation: string(OutOfCapacity)},
			annotations: map[string]string{FaultAnnotation: ""}, wantNode: true, wantKwok: true, wantReady: "True"},
		{name: "out of capacity", spec: map[string]any{"fault": string(OutOfCapacity)},
			wantFailure: FailureReasonInsufficientCapacity, wantReady: "False"},
		{name: "never ready", spec: shape, annotations: map[string]string{FaultAnnotation: string(NeverReady)},
			wantNode: true, wantReady: "True"},
		{name: "slow boot", spec: shape, annotations: map[string]string{BootDelayAnnotation: "1h"}, wantRequeue: true},
		{name: "bad boot delay", spec: shape, annotations: map[string]string{BootDelayAnnotation: "soon"},
			wantFailure: "InvalidConfiguration", wantReady: "False"},
		{name: "unknown fault", spec: map[string]any{"fault": "Meteor"}, wantFailure: "InvalidConfiguration", wantReady: "False"},
		{name: "typo in the spec", spec: map[string]any{"capacty": map[string]any{"cpu": "4"}},
			wantFailure: "InvalidConfiguration", wantReady: "False"},
		{name: "node name taken", spec: shape,
			existing: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{"someone": "else"}}},
			wantNode: true, wantErr: "belongs to someone else"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			u := devMachine(tc.spec, tc.annotations)
			if tc.orphan {
				u.SetOwnerReferences(nil)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), u.DeepCopy())
			var objs []runtime.Object
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			kube := kubefake.NewClientset(objs...)
			c := New(dyn, kube, Options{KubeletVersion: "v1.37.2"})
			if tc.template != nil {
				tmpl := &unstructured.Unstructured{}
				tmpl.SetAPIVersion(Group + "/" + Version)
				tmpl.SetKind(KindMachineTemplate)
				tmpl.SetNamespace("ns")
				tmpl.SetName("t1")
				tmpl.SetAnnotations(tc.template)
				if err := c.informers[MachineTemplateResource].GetIndexer().Add(tmpl); err != nil {
					t.Fatal(err)
				}
				ann := u.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann[clonedFromName] = "t1"
				u.SetAnnotations(ann)
			}
			after, err := c.reconcileMachine(ctx, u)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if (after > 30*time.Minute) != tc.wantRequeue {
				t.Errorf("requeue after %s, want requeue %v", after, tc.wantRequeue)
			}
			node, nodeErr := kube.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{})
			if (nodeErr == nil) != tc.wantNode {
				t.Fatalf("node: %v, want one %v", nodeErr, tc.wantNode)
			}
			if tc.existing != nil && node.Labels[OwnerLabel] != "" {
				t.Errorf("someone else's node was taken over: %v", node.Labels)
			}
			if tc.wantNode && tc.existing == nil {
				_, kwok := node.Annotations[controlplane.KwokNodeAnnotation]
				if kwok != tc.wantKwok || node.Spec.ProviderID != "dev:///ns/m1" {
					t.Errorf("node kwok %v providerID %q, want kwok %v", kwok, node.Spec.ProviderID, tc.wantKwok)
				}
			}
			got, err := dyn.Resource(MachineResource).Namespace("ns").Get(ctx, "m1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			reason, _, _ := unstructured.NestedString(got.Object, "status", "failureReason")
			provisioned, _, _ := unstructured.NestedBool(got.Object, "status", "initialization", "provisioned")
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			ready := ""
			if len(conds) == 1 {
				ready, _ = conds[0].(map[string]any)["status"].(string)
			}
			if reason != tc.wantFailure || ready != tc.wantReady || provisioned != (tc.wantReady == "True") {
				t.Errorf("status failureReason %q Ready %q provisioned %v, want %q %q", reason, ready, provisioned, tc.wantFailure, tc.wantReady)
			}
			if tc.wantFailure == FailureReasonInsufficientCapacity && conds[0].(map[string]any)["reason"] != ReasonOutOfCapacity {
				t.Errorf("Ready condition %v, want reason %s", conds[0], ReasonOutOfCapacity)
			}
		})
	}
}

// TestTemplateStatus: the template publishes what scale from zero reads,
// unless told not to.
func TestTemplateStatus(t *testing.T) {
	for _, publish := range []bool{true, false} {
		ctx := context.Background()
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"capacity": map[string]any{"cpu": "8", "memory": "32Gi"}, "nodeInfo": map[string]any{"architecture": "arm64"}}}}}}
		u.SetAPIVersion(Group + "/" + Version)
		u.SetKind(KindMachineTemplate)
		u.SetNamespace("ns")
		u.SetName("t1")
		if !publish {
			u.SetAnnotations(map[string]string{PublishCapacityAnnotation: "false"})
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), u.DeepCopy())
		c := New(dyn, kubefake.NewClientset(), Options{})
		if err := c.reconcileTemplate(ctx, u); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(MachineTemplateResource).Namespace("ns").Get(ctx, "t1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mem, _, _ := unstructured.NestedString(got.Object, "status", "capacity", "memory")
		arch, _, _ := unstructured.NestedString(got.Object, "status", "nodeInfo", "architecture")
		os, _, _ := unstructured.NestedString(got.Object, "status", "nodeInfo", "operatingSystem")
		if publish && (mem != "32Gi" || arch != "arm64" || os != "linux") {
			t.Errorf("published memory %q arch %q os %q", mem, arch, os)
		}
		if !publish && (mem != "" || arch != "") {
			t.Errorf("published memory %q arch %q despite %s=false", mem, arch, PublishCapacityAnnotation)
		}
	}
}

func listKinds() map[schema.GroupVersionResource]string {
	return map[schema.GroupVersionResource]string{
		MachineResource: "DevMachineList", MachineTemplateResource: "DevMachineTemplateList",
		MachinePoolResource: "DevMachinePoolList", ControlPlaneResource: "DevControlPlaneList",
		machinePoolResource: "MachinePoolList",
	}
}
