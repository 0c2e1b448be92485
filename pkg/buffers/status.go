package buffers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
)

// Reasons of the Provisioning condition. FitsExistingCapacity,
// RequiresNewCapacity and Infeasible are the reasons Kueue's CapacityBuffer
// admission check (KEP-5133) reads as Karpenter writes them;
// NotReadyForProvisioning and BufferEmpty are Karpenter's too. The others
// are ours, for what the contract has no name for (docs/capacity-buffers.md
// has the table).
const (
	ReasonFitsExisting     = "FitsExistingCapacity"
	ReasonRequiresNew      = "RequiresNewCapacity"
	ReasonInfeasible       = "Infeasible"
	ReasonNotReady         = "NotReadyForProvisioning"
	ReasonBufferEmpty      = "BufferEmpty"
	ReasonScaleUpNotMade   = "ScaleUpNotMade"
	ReasonScaleUpFailed    = "ScaleUpFailed"
	ReasonOutsideWindows   = "OutsideActiveWindows"
	EventTriggeredScaleUp  = "TriggeredScaleUp"
	EventNotTriggerScaleUp = "NotTriggerScaleUp"
	// EventInvalidCapacityBuff is the Warning of a buffer not ready.
	EventInvalidCapacityBuff = "InvalidCapacityBuffer"
)

// ReasonQuotasAllocated is upstream's one reason of LimitedByQuotas, True
// (the quotas cut the buffer) or False (they leave room for all of it).
const ReasonQuotasAllocated = "ResourceQuotasAllocated"

// ReasonQuotaListFailed (LimitedByQuotas, Provisioning, and the Warning
// event): the namespace's ResourceQuotas could not be listed; the buffer
// holds nothing until they can.
const ReasonQuotaListFailed = "QuotaListFailed"

// Status is the buffer's status as the pass leaves it. failed are the
// node groups whose scale-up failed in the pass; unsafe says why the pass
// made no scale-up at all ("" when it could).
func (b *Buffer) Status(failed map[string]error, unsafe string) v1beta1.CapacityBufferStatus {
	if b.OneShot != nil && b.OneShot.Terminal != "" {
		return b.terminalStatus()
	}
	st := *b.Obj.Status.DeepCopy()
	gen := b.Obj.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: trim(msg), ObservedGeneration: gen})
	}
	st.ProvisioningStrategy = ptr.To(b.Obj.Strategy())
	if b.NotReady != "" {
		if !b.statusShaped() {
			st.PodTemplateRef = nil
		}
		st.Replicas, st.ReadyReplicas, st.PodTemplateGeneration = nil, nil, nil
		set(v1beta1.ConditionReadyForProvisioning, metav1.ConditionFalse, b.NotReady, b.Message)
		set(v1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonNotReady, "the buffer is not ready for provisioning: "+b.Message)
		return st
	}
	st.PodTemplateRef, st.PodTemplateGeneration = b.TemplateRef, b.Generation
	// A one-shot buffer counts what its pods consumed as its own: its
	// replicas stay its target while it fills (as the proposal reads
	// them), and consumed chunks are there, so ready.
	var consumed int32
	if b.OneShot != nil {
		consumed = b.OneShot.Consumed
		st.ConsumedReplicas = ptr.To(consumed)
	}
	st.Replicas = ptr.To(consumed + b.Replicas)
	st.ReadyReplicas = ptr.To(consumed + int32(b.ReadyFit))
	shape := "the pod template of " + b.source()
	ready := metav1.Condition{Type: v1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue, Reason: ReasonResolved,
		Message: trim(fmt.Sprintf("%d pod(s) of %s%s", b.Wanted, shape, b.fillNote())), ObservedGeneration: gen}
	if b.OneShot != nil {
		// The fill deadline counts from this transition: the time the
		// pass measured with.
		ready.LastTransitionTime = metav1.NewTime(b.OneShot.FillStart)
	}
	apimeta.SetStatusCondition(&st.Conditions, ready)
	if !b.Active {
		msg := "outside the buffer's active windows; it holds nothing"
		if !b.Until.IsZero() {
			msg += " until " + b.Until.UTC().Format(time.RFC3339)
		}
		set(v1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonOutsideWindows, msg)
		st.Replicas, st.ReadyReplicas = ptr.To(consumed), ptr.To(consumed)
		return st
	}
	if b.QuotaErr != "" {
		msg := "the namespace's ResourceQuotas could not be read, so the buffer holds no capacity: " + b.QuotaErr
		set(v1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, ReasonQuotaListFailed, msg)
		set(v1beta1.ConditionProvisioning, metav1.ConditionFalse, ReasonQuotaListFailed, msg)
		st.Replicas, st.ReadyReplicas = ptr.To(consumed), ptr.To(consumed)
		return st
	}
	if b.Quota != "" {
		set(v1beta1.ConditionLimitedByQuotas, metav1.ConditionTrue, ReasonQuotasAllocated,
			fmt.Sprintf("%d of %d pod(s) within the namespace's ResourceQuotas: %s", b.Replicas, b.remaining(), b.Quota))
	} else {
		set(v1beta1.ConditionLimitedByQuotas, metav1.ConditionFalse, ReasonQuotasAllocated, "the namespace's ResourceQuotas leave room for every pod")
	}
	reason, status, msg := b.provisioning(failed, unsafe)
	set(v1beta1.ConditionProvisioning, status, reason, msg)
	return st
}

// provisioning is the Provisioning condition of a buffer that was served
// in the pass: the first that holds of empty, infeasible, not made,
// failed, coming, held.
func (b *Buffer) provisioning(failed map[string]error, unsafe string) (string, metav1.ConditionStatus, string) {
	held := fmt.Sprintf("%d of %d pod(s) fit existing or upcoming nodes (%d on nodes Ready now)", b.Fit, b.Replicas, b.ReadyFit)
	var groupErrs []string
	for _, up := range b.ScaleUps {
		g, _, _ := strings.Cut(up, " ")
		if err := failed[g]; err != nil {
			groupErrs = append(groupErrs, fmt.Sprintf("%s: %v", g, err))
		}
	}
	switch {
	case b.Replicas == 0 && b.Quota != "":
		return ReasonBufferEmpty, metav1.ConditionFalse, "the namespace's ResourceQuotas leave room for no pod: " + b.Quota
	case b.Replicas == 0 && b.OneShot != nil:
		return ReasonBufferEmpty, metav1.ConditionFalse, fmt.Sprintf("nothing left to hold: %d of %d chunk(s) consumed, %d taken by pending pods about to bind",
			b.OneShot.Consumed, b.Wanted, b.OneShot.InFlight)
	case b.Replicas == 0:
		return ReasonBufferEmpty, metav1.ConditionFalse, "the buffer resolves to 0 pods"
	case b.Infeasible > 0:
		return ReasonInfeasible, metav1.ConditionFalse,
			fmt.Sprintf("%d pod(s) fit no node group's template, so no node can be added for them: %s; %s", b.Infeasible, b.Why, held)
	case b.Planned > 0 && unsafe != "":
		return ReasonScaleUpNotMade, metav1.ConditionFalse, fmt.Sprintf("%s; the cluster is unsafe to scale up: %s", held, unsafe)
	case len(groupErrs) > 0:
		return ReasonScaleUpFailed, metav1.ConditionFalse, fmt.Sprintf("%s; scale-up failed: %s", held, strings.Join(groupErrs, "; "))
	case b.Planned > 0 || b.Unplaced > 0:
		// Unplaced pods here wait for a limit, backoff or reservation of
		// the moment: new capacity is what they need (as Karpenter counts
		// its failed pods).
		msg := held
		if b.Planned > 0 {
			msg += fmt.Sprintf("; %d on new nodes: %s", b.Planned, strings.Join(b.ScaleUps, ", "))
		}
		if b.Unplaced > 0 {
			msg += fmt.Sprintf("; %d find no room for now: %s", b.Unplaced, b.Why)
		}
		return ReasonRequiresNew, metav1.ConditionFalse, msg
	}
	return ReasonFitsExisting, metav1.ConditionTrue, fmt.Sprintf("all %d pod(s) fit existing or upcoming nodes (%d on nodes Ready now)", b.Fit, b.ReadyFit)
}

func (b *Buffer) source() string {
	if b.TemplateRef != nil {
		return "PodTemplate " + b.TemplateRef.Name
	}
	r := b.Obj.Spec.ScalableRef
	return r.Kind + " " + r.Name
}

// Write stores every buffer's status that changed and tells the buffers
// the pass scaled up for, or could not help. results are the pass's
// scale-ups (a failed one fails the buffers that needed its group).
func (p *Manager) Write(ctx context.Context, out *PassOutcome, results []act.LaunchResult, unsafe string) {
	if out == nil || p.dyn == nil {
		return
	}
	failed := map[string]error{}
	for _, r := range results {
		if r.Err != nil {
			failed[r.Group.Id] = r.Err
		}
	}
	for _, b := range out.Buffers {
		st := b.Status(failed, unsafe)
		if equality.Semantic.DeepEqual(st, b.Obj.Status) {
			continue
		}
		if !p.patch(ctx, b, st) {
			continue
		}
		// Events tell of what changed, once.
		prov := apimeta.FindStatusCondition(st.Conditions, v1beta1.ConditionProvisioning)
		old := apimeta.FindStatusCondition(b.Obj.Status.Conditions, v1beta1.ConditionProvisioning)
		if prov == nil || (old != nil && old.Reason == prov.Reason && old.Message == prov.Message) {
			continue
		}
		switch prov.Reason {
		case ReasonRequiresNew:
			if b.Planned > 0 {
				p.event(b, corev1.EventTypeNormal, EventTriggeredScaleUp, prov.Message)
			}
			if b.Unplaced > 0 {
				p.event(b, corev1.EventTypeNormal, EventNotTriggerScaleUp, prov.Message)
			}
		case ReasonInfeasible:
			p.event(b, corev1.EventTypeNormal, EventNotTriggerScaleUp, prov.Message)
		case ReasonNotReady:
			reason := EventInvalidCapacityBuff
			if b.NotReady == ReasonPodRejected || b.NotReady == ReasonAdmissionUnknown {
				reason = b.NotReady
			}
			p.event(b, corev1.EventTypeWarning, reason, prov.Message)
		case ReasonQuotaListFailed:
			p.event(b, corev1.EventTypeWarning, ReasonQuotaListFailed, prov.Message)
		case ReasonBufferFilled, ReasonDeadlineExceed:
			p.event(b, corev1.EventTypeNormal, prov.Reason, prov.Message)
		}
	}
}

func (p *Manager) patch(ctx context.Context, b *Buffer, st v1beta1.CapacityBufferStatus) bool {
	logger := klog.FromContext(ctx).WithValues("capacityBuffer", b.Key())
	data, err := statusPatch(st, b.statusShaped())
	if err != nil {
		logger.Error(err, "Encoding CapacityBuffer status failed")
		return false
	}
	_, err = p.dyn.Resource(v1beta1.Resource).Namespace(b.Obj.Namespace).Patch(ctx, b.Obj.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
	if err != nil {
		logger.V(2).Info("Writing CapacityBuffer status failed; retried next pass", "err", err)
		return false
	}
	logger.V(2).Info("CapacityBuffer status written", "replicas", ptr.Deref(st.Replicas, 0))
	return true
}

// statusPatch is a merge patch of the status that also removes the fields
// st leaves unset: omitted, a merge patch would keep their old values
// (the replicas of a buffer no longer ready, say), and every later pass
// would find the status changed and write it again. shaped leaves
// podTemplateRef out: it is the input of a buffer shaped by its status,
// which its controller may have just written.
func statusPatch(st v1beta1.CapacityBufferStatus, shaped bool) ([]byte, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	fields := map[string]any{}
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	for _, f := range []string{"podTemplateRef", "replicas", "readyReplicas", "podTemplateGeneration", "provisioningStrategy"} {
		if _, ok := fields[f]; !ok {
			fields[f] = nil
		}
	}
	if shaped {
		delete(fields, "podTemplateRef")
	}
	return json.Marshal(map[string]any{"status": fields})
}

func (p *Manager) event(b *Buffer, typ, reason, msg string) {
	if p.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: v1beta1.SchemeGroupVersion.String(), Kind: v1beta1.Kind,
		Namespace: b.Obj.Namespace, Name: b.Obj.Name, UID: b.Obj.UID}
	p.recorder.Event(ref, typ, reason, msg)
}

// trim keeps messages well inside the condition's limit (32768).
func trim(s string) string {
	const max = 2000
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
