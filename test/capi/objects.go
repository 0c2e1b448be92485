// Package capi builds the Cluster API objects the e2e tests create and reads
// back the state of Machines. Without Cluster API's defaulting webhooks
// (test/controlplane runs the manager without them) nothing fills defaults,
// so these builders set what the webhooks would: the cluster-name label, the
// selector and template labels, replicas, the rollout strategy, a "v"
// version, and bootstrap.dataSecretName instead of a bootstrap provider.
package capi

import (
	"fmt"
	"maps"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dra-autoscaler/dra-autoscaler/test/capi/infra"
	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

const (
	Group   = "cluster.x-k8s.io"
	Version = "v1beta2"

	ClusterNameLabel    = Group + "/cluster-name"
	DeploymentNameLabel = Group + "/deployment-name"
	SetNameLabel        = Group + "/set-name"
	PoolNameLabel       = Group + "/pool-name"
	// DeleteMachineAnnotation on a Machine makes it the first to go when
	// its MachineSet shrinks.
	DeleteMachineAnnotation = Group + "/delete-machine"
	// MachineAnnotation on a Node names its Machine (set by Cluster API).
	MachineAnnotation = Group + "/machine"
	// MinSizeAnnotation and MaxSizeAnnotation make a group autoscaled.
	MinSizeAnnotation = Group + "/cluster-api-autoscaler-node-group-min-size"
	MaxSizeAnnotation = Group + "/cluster-api-autoscaler-node-group-max-size"
	// KubeconfigSecretKey is the key of the <cluster>-kubeconfig Secret.
	KubeconfigSecretKey = "value"
)

var (
	ClusterResource           = gvr("clusters")
	MachineResource           = gvr("machines")
	MachineSetResource        = gvr("machinesets")
	MachineDeploymentResource = gvr("machinedeployments")
	MachinePoolResource       = gvr("machinepools")
)

func gvr(res string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: res}
}

// ResourceOf maps the kinds these builders make to their resources.
func ResourceOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	switch u.GetKind() {
	case "Cluster":
		return ClusterResource, nil
	case "Machine":
		return MachineResource, nil
	case "MachineSet":
		return MachineSetResource, nil
	case "MachineDeployment":
		return MachineDeploymentResource, nil
	case "MachinePool":
		return MachinePoolResource, nil
	case infra.KindMachine:
		return infra.MachineResource, nil
	case infra.KindMachineTemplate:
		return infra.MachineTemplateResource, nil
	case infra.KindMachinePool:
		return infra.MachinePoolResource, nil
	case infra.KindControlPlane:
		return infra.ControlPlaneResource, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("capi: no resource known for kind %q", u.GetKind())
}

func object(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func set(u *unstructured.Unstructured, value any, path ...string) {
	if err := unstructured.SetNestedField(u.Object, runtime.DeepCopyJSONValue(value), path...); err != nil {
		panic(fmt.Sprintf("capi builder: %v", err)) // only reachable by a bug in this file
	}
}

// ControlPlane is the fake, externally managed control plane of a Cluster
// (test/capi/infra reports it initialized).
func ControlPlane(ns, name string) *unstructured.Unstructured {
	u := object(infra.ControlPlaneGroup+"/"+infra.Version, infra.KindControlPlane, ns, name)
	set(u, map[string]any{}, "spec")
	return u
}

// Cluster is a Cluster whose control plane is ControlPlane(ns, name+"-cp")
// at host:port (it must be valid for Cluster API; the workload cluster is
// reached through the <name>-kubeconfig Secret).
func Cluster(ns, name, host string, port int) *unstructured.Unstructured {
	u := object(Group+"/"+Version, "Cluster", ns, name)
	u.SetLabels(map[string]string{ClusterNameLabel: name})
	set(u, map[string]any{
		"controlPlaneEndpoint": map[string]any{"host": host, "port": int64(port)},
		"controlPlaneRef":      map[string]any{"apiGroup": infra.ControlPlaneGroup, "kind": infra.KindControlPlane, "name": name + "-cp"},
	}, "spec")
	return u
}

// MachineTemplate is a DevMachineTemplate whose machines have spec.
func MachineTemplate(ns, name string, spec infra.MachineSpec) *unstructured.Unstructured {
	u := object(infra.Group+"/"+infra.Version, infra.KindMachineTemplate, ns, name)
	set(u, map[string]any{"spec": toMap(spec)}, "spec", "template")
	return u
}

// DevMachinePool is the infrastructure of a MachinePool: one Node of spec
// per replica.
func DevMachinePool(ns, name string, spec infra.MachineSpec) *unstructured.Unstructured {
	u := object(infra.Group+"/"+infra.Version, infra.KindMachinePool, ns, name)
	set(u, toMap(spec), "spec", "template")
	return u
}

func toMap(spec infra.MachineSpec) map[string]any {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		panic(fmt.Sprintf("capi builder: MachineSpec: %v", err)) // a plain struct always converts
	}
	return m
}

// GroupOption changes a MachineDeployment, MachineSet or MachinePool.
type GroupOption func(*unstructured.Unstructured)

// Replicas sets spec.replicas (default 0: no webhook defaults it).
func Replicas(n int32) GroupOption {
	return func(u *unstructured.Unstructured) { set(u, int64(n), "spec", "replicas") }
}

// Bounds sets the autoscaler's min and max size annotations.
func Bounds(minSize, maxSize int) GroupOption {
	return Annotations(MinSizeAnnotation, strconv.Itoa(minSize), MaxSizeAnnotation, strconv.Itoa(maxSize))
}

// Annotations adds key, value pairs to the group's annotations (e.g. the
// capacity.cluster-autoscaler.kubernetes.io/ ones).
func Annotations(kv ...string) GroupOption {
	return func(u *unstructured.Unstructured) {
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			ann[kv[i]] = kv[i+1]
		}
		u.SetAnnotations(ann)
	}
}

// Labels adds labels to the group object itself (for discovery specs).
func Labels(kv map[string]string) GroupOption {
	return func(u *unstructured.Unstructured) {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		maps.Copy(l, kv)
		u.SetLabels(l)
	}
}

// MachineLabels adds labels to the Machines' template (spec.template.spec
// is unchanged; Cluster API propagates node.cluster.x-k8s.io/ and
// node-role labels from Machines to Nodes).
func MachineLabels(kv map[string]string) GroupOption {
	return func(u *unstructured.Unstructured) {
		l, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		if l == nil {
			l = map[string]string{}
		}
		maps.Copy(l, kv)
		set(u, toAnyMap(l), "spec", "template", "metadata", "labels")
	}
}

// DeletionOrder sets spec.deletion.order (Random, Newest or Oldest) of a
// MachineDeployment or MachineSet.
func DeletionOrder(order string) GroupOption {
	return func(u *unstructured.Unstructured) { set(u, order, "spec", "deletion", "order") }
}

// MachineDeployment is a MachineDeployment of cluster whose Machines are
// made from the DevMachineTemplate named template.
func MachineDeployment(ns, cluster, name, template string, opts ...GroupOption) *unstructured.Unstructured {
	u := group("MachineDeployment", ns, cluster, name, map[string]string{DeploymentNameLabel: name},
		map[string]any{"apiGroup": infra.Group, "kind": infra.KindMachineTemplate, "name": template})
	set(u, map[string]any{"type": "RollingUpdate",
		"rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0)}}, "spec", "rollout", "strategy")
	return apply(u, opts)
}

// MachineSet is a MachineSet not owned by a MachineDeployment.
func MachineSet(ns, cluster, name, template string, opts ...GroupOption) *unstructured.Unstructured {
	u := group("MachineSet", ns, cluster, name, map[string]string{SetNameLabel: name},
		map[string]any{"apiGroup": infra.Group, "kind": infra.KindMachineTemplate, "name": template})
	return apply(u, opts)
}

// MachinePool is a MachinePool whose infrastructure is the DevMachinePool
// named pool (it has no selector).
func MachinePool(ns, cluster, name, pool string, opts ...GroupOption) *unstructured.Unstructured {
	u := group("MachinePool", ns, cluster, name, map[string]string{PoolNameLabel: name},
		map[string]any{"apiGroup": infra.Group, "kind": infra.KindMachinePool, "name": pool})
	unstructured.RemoveNestedField(u.Object, "spec", "selector")
	return apply(u, opts)
}

func group(kind, ns, cluster, name string, own map[string]string, infraRef map[string]any) *unstructured.Unstructured {
	u := object(Group+"/"+Version, kind, ns, name)
	u.SetLabels(map[string]string{ClusterNameLabel: cluster})
	labels := map[string]string{ClusterNameLabel: cluster}
	maps.Copy(labels, own)
	set(u, map[string]any{
		"clusterName": cluster,
		"replicas":    int64(0),
		"selector":    map[string]any{"matchLabels": toAnyMap(labels)},
		"template": map[string]any{
			"metadata": map[string]any{"labels": toAnyMap(labels)},
			"spec": map[string]any{
				"clusterName":       cluster,
				"version":           controlplane.KubernetesVersion,
				"bootstrap":         map[string]any{"dataSecretName": "no-bootstrap"},
				"infrastructureRef": infraRef,
			},
		},
	}, "spec")
	return u
}

func apply(u *unstructured.Unstructured, opts []GroupOption) *unstructured.Unstructured {
	for _, o := range opts {
		o(u)
	}
	return u
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// NodeSlice turns a built ResourceSlice (e.g. from test/builder) into the
// spec a template declares: node selection, pool name, generation and slice
// count are cleared, so the provider fills them for each Node it makes.
func NodeSlice(s *resourceapi.ResourceSlice) resourceapi.ResourceSliceSpec {
	spec := *s.Spec.DeepCopy()
	spec.NodeName, spec.NodeSelector, spec.AllNodes, spec.PerDeviceNodeSelection = nil, nil, nil, nil
	spec.Pool = resourceapi.ResourcePool{}
	return spec
}
