package infra

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

var machinePoolResource = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinepools"}

// reconcilePool keeps one Node per replica of the owning MachinePool,
// named <pool>-<uid[:5]>-<index> (pools of the same name in two namespaces
// never share Nodes): a scale-down removes the highest indexes, the choice
// a cloud's instance group makes for the caller.
func (c *Controller) reconcilePool(ctx context.Context, u *unstructured.Unstructured) error {
	ref := klog.KObj(u)
	if u.GetDeletionTimestamp() != nil {
		if !slices.Contains(u.GetFinalizers(), Finalizer) {
			return nil
		}
		if err := c.deleteNodeOf(ctx, string(u.GetUID())); err != nil {
			return fmt.Errorf("%s %s: cleaning up: %w", KindMachinePool, ref, err)
		}
		return c.setFinalizers(ctx, u, slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == Finalizer }))
	}
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		return c.setFinalizers(ctx, u, append(slices.Clone(u.GetFinalizers()), Finalizer))
	}
	var owner string
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "MachinePool" && strings.HasPrefix(o.APIVersion, "cluster.x-k8s.io/") {
			owner = o.Name
		}
	}
	if owner == "" {
		return nil // Cluster API sets the owner reference; until then there is nothing to size
	}
	mp, err := c.dyn.Resource(machinePoolResource).Namespace(u.GetNamespace()).Get(ctx, owner, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s %s: owner MachinePool %s: %w", KindMachinePool, ref, owner, err)
	}
	replicas, found, err := unstructured.NestedInt64(mp.Object, "spec", "replicas")
	if err != nil || !found {
		return fmt.Errorf("%s %s: MachinePool %s has no spec.replicas (there is no defaulting webhook; set it)", KindMachinePool, ref, owner)
	}
	var spec MachineSpec
	if err := nestedInto(u, &spec, "spec", "template"); err != nil {
		return fmt.Errorf("%s %s: spec.template: %w", KindMachinePool, ref, err)
	}
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: OwnerLabel + "=" + string(u.GetUID())})
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("%s-%.5s-", u.GetName(), u.GetUID())
	for _, n := range nodes.Items {
		i, err := strconv.ParseInt(strings.TrimPrefix(n.Name, prefix), 10, 64)
		if err == nil && i < replicas {
			continue
		}
		if err := c.deleteNodes(ctx, NodeLabel+"="+n.Name); err != nil {
			return err
		}
		if err := c.kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("%s %s: deleting node %s: %w", KindMachinePool, ref, n.Name, err)
		}
	}
	ids := []any{}
	for i := range replicas {
		name := fmt.Sprintf("%s%d", prefix, i)
		s := spec
		s.ProviderID = ProviderIDPrefix + u.GetNamespace() + "/" + name
		if err := c.applyNode(ctx, u.GetUID(), name, s, false); err != nil {
			return fmt.Errorf("%s %s: %w", KindMachinePool, ref, err)
		}
		ids = append(ids, s.ProviderID)
	}
	gotIDs, _, _ := unstructured.NestedSlice(u.Object, "spec", "providerIDList")
	if !equalJSON(gotIDs, ids) {
		if err := c.patch(ctx, u, map[string]any{"spec": map[string]any{"providerIDList": ids}}, ""); err != nil {
			return err
		}
	}
	status := map[string]any{"replicas": replicas, "ready": true, "initialization": map[string]any{"provisioned": true}}
	if !changes(u, status) {
		return nil
	}
	return c.patch(ctx, u, map[string]any{"status": status}, "status")
}
