package upkeep

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
)

// Condition types and reasons of a CapacityReservation's status.
const (
	ConditionValid  = "Valid"
	ConditionActive = "Active"

	reasonAccepted   = "Accepted"
	reasonInvalid    = "Invalid"
	reasonActive     = "Active"
	reasonEnding     = "Ending"
	reasonNotStarted = "NotStarted"
	reasonEnded      = "Ended"
)

// writeStatus writes used, available and the conditions back to the
// objects that serve at least one of this autoscaler's groups (another
// autoscaler may own the others), only when they change.
func (k *Keeper) writeStatus(ctx context.Context, objs []reservations.Object, b *reservations.Book) {
	if k.dyn == nil {
		return
	}
	slots := map[string]*reservations.Slot{}
	for _, sl := range b.Slots() {
		if sl.Origin == reservations.SourceCRD {
			slots[sl.ID] = sl
		}
	}
	for _, o := range objs {
		sl := slots[o.Reservation.ID]
		if sl == nil || len(b.ServedGroups(sl)) == 0 {
			continue
		}
		st := *o.CR.Status.DeepCopy()
		st.Used, st.Available = int32(sl.InUse), int32(b.Left(sl))
		gen := o.CR.Generation
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionTrue,
			Reason: reasonAccepted, Message: "the autoscaler counts this reservation", ObservedGeneration: gen})
		active := metav1.Condition{Type: ConditionActive, Status: metav1.ConditionTrue, Reason: reasonActive, ObservedGeneration: gen,
			Message: fmt.Sprintf("serves %s", strings.Join(b.ServedGroups(sl), ", "))}
		switch {
		case !sl.Started(b.Now()):
			active.Status, active.Reason, active.Message = metav1.ConditionFalse, reasonNotStarted, "starts at "+sl.Start.UTC().Format("2006-01-02T15:04:05Z")
		case sl.Ended(b.Now()):
			active.Status, active.Reason, active.Message = metav1.ConditionFalse, reasonEnded, "ended at "+sl.End.UTC().Format("2006-01-02T15:04:05Z")
		case sl.Ending(b.Now(), b.Margin()):
			active.Reason, active.Message = reasonEnding, "ends at "+sl.End.UTC().Format("2006-01-02T15:04:05Z")+", within the end margin: its nodes are drained"
		}
		meta.SetStatusCondition(&st.Conditions, active)
		if equality.Semantic.DeepEqual(st, o.CR.Status) {
			continue
		}
		k.patchStatus(ctx, o.CR.Name, st)
	}
}

func (k *Keeper) patchStatus(ctx context.Context, name string, st v1alpha1.CapacityReservationStatus) {
	if k.dyn == nil {
		return
	}
	data, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return
	}
	if _, err := k.dyn.Resource(v1alpha1.Resource).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		klog.FromContext(ctx).V(2).Info("Writing CapacityReservation status failed; retried next loop", "capacityReservation", name, "err", err)
	}
}

// reportRejected gives each invalid object (once per generation) a
// Warning event and, when it may concern this autoscaler's groups, a
// Valid=False condition; the object is otherwise ignored.
func (k *Keeper) reportRejected(ctx context.Context, rejected []reservations.Rejected, b *reservations.Book) {
	// Only objects still invalid are remembered, so the set stays small.
	warned := map[string]bool{}
	defer func() { k.warned = warned }()
	for _, r := range rejected {
		u := r.Object
		key := fmt.Sprintf("%s/%d", u.GetUID(), u.GetGeneration())
		warned[key] = true
		if k.warned[key] {
			continue
		}
		klog.FromContext(ctx).Info("Ignoring an invalid CapacityReservation", "capacityReservation", u.GetName(), "err", r.Err)
		k.eventRef(objectRef(u), corev1.EventTypeWarning, EventInvalid, "Ignored by the autoscaler: "+r.Err.Error())
		if !mayConcern(u, b) {
			continue
		}
		st := v1alpha1.CapacityReservationStatus{}
		if conds, ok, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); ok {
			_ = convertInto(conds, &st.Conditions)
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionValid, Status: metav1.ConditionFalse,
			Reason: reasonInvalid, Message: r.Err.Error(), ObservedGeneration: u.GetGeneration()})
		k.patchStatus(ctx, u.GetName(), st)
	}
}

// mayConcern: the object names one of the book's groups, or cannot be read
// far enough to tell.
func mayConcern(u *unstructured.Unstructured, b *reservations.Book) bool {
	names, ok, err := unstructured.NestedStringSlice(u.Object, "spec", "nodeGroups")
	if err != nil || !ok {
		return true
	}
	for _, n := range names {
		if b.HasGroup(n) {
			return true
		}
	}
	return false
}

func convertInto(in any, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func objectRef(u *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CapacityReservation",
		Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion()}
}

// event records on the reservation's object; provider reservations have
// none, so their events go to the log only.
func (k *Keeper) event(r *reservations.Reservation, eventType, reason, msg string) {
	if r.Origin != reservations.SourceCRD {
		return
	}
	k.eventRef(&corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CapacityReservation",
		Name: r.Name, UID: r.UID}, eventType, reason, msg)
}

func (k *Keeper) eventRef(ref *corev1.ObjectReference, eventType, reason, msg string) {
	if k.recorder == nil {
		return
	}
	k.recorder.Event(ref, eventType, reason, msg)
}
