package infra

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const mergePatch = types.MergePatchType

// clonedFromName is the annotation Cluster API puts on an InfraMachine
// naming the template it was cloned from.
const clonedFromName = "cluster.x-k8s.io/cloned-from-name"

func (c *Controller) reconcileMachine(ctx context.Context, u *unstructured.Unstructured) (time.Duration, error) {
	ref := klog.KObj(u)
	if u.GetDeletionTimestamp() != nil {
		if !slices.Contains(u.GetFinalizers(), Finalizer) {
			return 0, nil
		}
		if err := c.deleteNodeOf(ctx, string(u.GetUID())); err != nil {
			return 0, fmt.Errorf("%s %s: cleaning up: %w", KindMachine, ref, err)
		}
		return 0, c.setFinalizers(ctx, u, slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == Finalizer }))
	}
	if !slices.Contains(u.GetFinalizers(), Finalizer) {
		// Added before any Node exists, so no Node outlives its machine.
		return 0, c.setFinalizers(ctx, u, append(slices.Clone(u.GetFinalizers()), Finalizer))
	}
	if !ownedByMachine(u) {
		// The infrastructure-machine contract: act only once a Machine has
		// adopted it. One a failed clone left behind has no Machine, and a
		// Node made for it would be a ghost the scheduler could use.
		// Adoption is an update, which brings the machine back here.
		return 0, nil
	}
	var spec MachineSpec
	if err := nestedInto(u, &spec, "spec"); err != nil {
		return 0, c.fail(ctx, u, "InvalidConfiguration", fmt.Sprintf("spec: %v", err))
	}
	if reason, _, _ := unstructured.NestedString(u.Object, "status", "failureReason"); reason != "" {
		return 0, nil // failed machines stay failed, as in a cloud
	}
	if provisioned, _, _ := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned"); provisioned {
		// The Node was made before provisioned was set, exactly once: Cluster
		// API deletes it before the DevMachine when a Machine goes, and a
		// recreated one would be a ghost the scheduler could use.
		return 0, nil
	}
	fault, delay, err := c.knobs(u, spec)
	if err != nil {
		return 0, c.fail(ctx, u, "InvalidConfiguration", err.Error())
	}
	switch fault {
	case NeverProvision:
		return 0, nil
	case OutOfCapacity:
		return 0, c.fail(ctx, u, FailureReasonInsufficientCapacity,
			fmt.Sprintf("out of capacity: no %s machine available", u.GetAnnotations()[clonedFromName]))
	case NoFault, NeverReady:
	default:
		return 0, c.fail(ctx, u, "InvalidConfiguration", fmt.Sprintf("unknown fault %q", fault))
	}
	if wait := time.Until(u.GetCreationTimestamp().Add(delay)); wait > 0 {
		return wait, nil
	}
	spec.ProviderID = ProviderIDPrefix + u.GetNamespace() + "/" + u.GetName()
	spec.Fault = fault // remembered, so a recreated Node behaves the same
	if err := c.ensureNode(ctx, u, spec, fault == NeverReady); err != nil {
		return 0, err
	}
	patch := map[string]any{"spec": map[string]any{"providerID": spec.ProviderID, "fault": string(fault)}}
	if err := c.patch(ctx, u, patch, ""); err != nil {
		return 0, err
	}
	status := map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"ready":          true, // the v1beta1 contract's name
		"addresses":      []any{map[string]any{"type": "InternalIP", "address": "10.0.0.1"}},
		"conditions":     []any{condition("True", "Provisioned", "")},
	}
	if had, _, _ := unstructured.NestedString(u.Object, "spec", "providerID"); had == "" {
		// A second pass on a stale cache only repeats the same writes.
		klog.InfoS("dev infrastructure: machine provisioned", "machine", klog.KObj(u), "providerID", spec.ProviderID, "fault", fault)
	}
	return 0, c.patch(ctx, u, map[string]any{"status": status}, "status")
}

// knobs resolves the fault and boot delay: the machine's annotations, then
// its template's (read now, so a test can change them on a live group),
// then the spec copied from the template.
func (c *Controller) knobs(u *unstructured.Unstructured, spec MachineSpec) (Fault, time.Duration, error) {
	fault, delay := spec.Fault, spec.BootDelay
	var tmplAnn map[string]string
	if name := u.GetAnnotations()[clonedFromName]; name != "" {
		if obj, ok, _ := c.informers[MachineTemplateResource].GetIndexer().GetByKey(u.GetNamespace() + "/" + name); ok {
			tmplAnn = obj.(*unstructured.Unstructured).GetAnnotations()
		}
	}
	for _, ann := range []map[string]string{tmplAnn, u.GetAnnotations()} {
		if v, ok := ann[FaultAnnotation]; ok {
			fault = Fault(v)
		}
		if v, ok := ann[BootDelayAnnotation]; ok {
			delay = v
		}
	}
	if delay == "" {
		return fault, 0, nil
	}
	d, err := time.ParseDuration(delay)
	if err != nil || d < 0 {
		return "", 0, fmt.Errorf("boot delay %q is not a non-negative Go duration", delay)
	}
	return fault, d, nil
}

// fail reports a machine that will not come: failureReason/failureMessage
// and a Ready=False condition, which Cluster API mirrors into the Machine's
// InfrastructureReady condition and deprecated v1beta1 failure fields.
func (c *Controller) fail(ctx context.Context, u *unstructured.Unstructured, reason, message string) error {
	condReason := reason
	if reason == FailureReasonInsufficientCapacity {
		condReason = ReasonOutOfCapacity
	}
	klog.InfoS("dev infrastructure: machine failed", "machine", klog.KObj(u), "reason", reason, "message", message)
	status := map[string]any{
		"failureReason":  reason,
		"failureMessage": message,
		"conditions":     []any{condition("False", condReason, message)},
	}
	return c.patch(ctx, u, map[string]any{"status": status}, "status")
}

// condition is a metav1.Condition as unstructured (Cluster API mirrors the
// infrastructure's Ready condition into the Machine's InfrastructureReady).
func condition(status, reason, message string) map[string]any {
	return map[string]any{"type": "Ready", "status": status, "reason": reason, "message": message,
		"lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)}
}

func (c *Controller) setFinalizers(ctx context.Context, u *unstructured.Unstructured, finalizers []string) error {
	// The resourceVersion makes this a compare-and-swap on the list.
	patch := map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": u.GetResourceVersion()}}
	return c.patch(ctx, u, patch, "")
}

func (c *Controller) patch(ctx context.Context, u *unstructured.Unstructured, patch map[string]any, subresource string) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	res := MachineResource
	if u.GetKind() == KindMachinePool {
		res = MachinePoolResource
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err = c.dyn.Resource(res).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), mergePatch, data, metav1.PatchOptions{}, sub...)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// equalJSON compares two values as their JSON forms, so int64 and float64
// numbers of the same value are equal.
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}

// ownedByMachine tells whether a Cluster API Machine owns u.
func ownedByMachine(u *unstructured.Unstructured) bool {
	for _, o := range u.GetOwnerReferences() {
		if o.Kind == "Machine" && strings.HasPrefix(o.APIVersion, "cluster.x-k8s.io/") {
			return true
		}
	}
	return false
}
