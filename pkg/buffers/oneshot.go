package buffers

// One-shot buffers (spec.refillStrategy none), as the open proposal
// kubernetes/autoscaler#10108 and Karpenter's reference implementation
// (karpenter#3257) describe them: the buffer is provisioned once, its
// matching pods fill it as they bind (status.consumedReplicas, a
// high-water mark that never decreases), only the remainder is held, and
// it ends Fulfilled (filled) or Expired (spec.fillDeadlineSeconds passed
// unfilled), after which it holds nothing and scale-down may take its
// nodes like any others.

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// Reasons of the terminal conditions (the proposal's), also the
// Provisioning reason of a terminal buffer and the event it gets.
const (
	ReasonBufferFilled   = "BufferFilled"
	ReasonDeadlineExceed = "FillDeadlineExceeded"
)

// deviceSuffix ends the quota key of a DeviceClass's devices: the
// dimension a chunk's devices are counted in.
const deviceSuffix = ".deviceclass.resource.k8s.io/devices"

// oneShot is what a pass learned of a one-shot buffer.
type oneShot struct {
	// Consumed is the high-water mark of chunks its bound pods took;
	// InFlight the chunks its pending pods are about to take (this pass
	// only: they are not consumed until they bind).
	Consumed, InFlight int32
	// Terminal is ConditionFulfilled or ConditionExpired once the buffer
	// ended ("" while it is filling).
	Terminal string
	// Selector says which pods fill the buffer (for messages).
	Selector string
	// FillStart is when the buffer became ReadyForProvisioning: pods
	// bound before it did not take its capacity, and the deadline counts
	// from it.
	FillStart time.Time
}

// latches keeps what each one-shot buffer reached, so a stale informer
// copy (a status write not yet seen) never lowers consumedReplicas or
// revives a terminal buffer. Restarts read it back from the status.
type latches struct {
	mu  sync.Mutex
	got map[types.UID]oneShot
}

func (l *latches) get(uid types.UID) (oneShot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.got[uid]
	return o, ok
}

func (l *latches) put(uid types.UID, o oneShot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.got == nil {
		l.got = map[types.UID]oneShot{}
	}
	l.got[uid] = o
}

func (l *latches) forget(seen map[types.UID]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid := range l.got {
		if !seen[uid] {
			delete(l.got, uid)
		}
	}
}

// terminalOf is the terminal condition the stored status (or the
// latch) says the buffer ended with, "" if none.
func terminalOf(obj *v1beta1.CapacityBuffer, latched oneShot) string {
	for _, typ := range []string{v1beta1.ConditionFulfilled, v1beta1.ConditionExpired} {
		if apimeta.IsStatusConditionTrue(obj.Status.Conditions, typ) {
			return typ
		}
	}
	return latched.Terminal
}

// ended is a terminal one-shot buffer: it holds nothing and is not
// resolved again (its template may be gone).
func ended(obj *v1beta1.CapacityBuffer, latched oneShot) *Buffer {
	o := latched
	o.Terminal = terminalOf(obj, latched)
	o.Consumed = max(o.Consumed, ptr.Deref(obj.Status.ConsumedReplicas, 0))
	return &Buffer{Obj: obj, Active: true, Wanted: ptr.Deref(obj.Spec.Replicas, 0), OneShot: &o}
}

// matchSelector is the pods that fill the buffer: Karpenter's interim
// annotation when set, else the pod template's labels (pods of the
// template's shape and labels are the workload it was sized for). A
// template without labels and no annotation: no pod fills it (it may
// still expire).
func matchSelector(obj *v1beta1.CapacityBuffer, t *corev1.PodTemplateSpec) (labels.Selector, string, error) {
	if raw, ok := obj.Annotations[v1beta1.MatchSelectorAnnotation]; ok {
		sel, err := labels.Parse(raw)
		if err != nil {
			return nil, "", fmt.Errorf("annotation %s: %w", v1beta1.MatchSelectorAnnotation, err)
		}
		if sel.Empty() {
			return nil, "", fmt.Errorf("annotation %s is empty: it would match every pod of the namespace", v1beta1.MatchSelectorAnnotation)
		}
		return sel, sel.String(), nil
	}
	if t == nil || len(t.Labels) == 0 {
		return labels.Nothing(), "", nil
	}
	sel := labels.SelectorFromSet(t.Labels)
	return sel, sel.String(), nil
}

// chunkOf is what one pod counts toward filling a buffer: its requests
// (as the scheduler counts them) and its devices per DeviceClass (from
// its claim templates, as the quota admission charges them), without
// the pod count.
func chunkOf(pod *corev1.Pod, ev evaluators, claimTemplate func(string) *resourceapi.ResourceClaimTemplate) corev1.ResourceList {
	out := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	delete(out, corev1.ResourcePods)
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimTemplateName == nil || claimTemplate == nil || ev.claim == nil {
			continue
		}
		ct := claimTemplate(*pc.ResourceClaimTemplateName)
		if ct == nil {
			continue
		}
		u, err := ev.claim.Usage(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace}, Spec: ct.Spec.Spec})
		if err != nil {
			continue
		}
		for k, q := range u {
			if strings.HasSuffix(string(k), deviceSuffix) {
				sum := out[k]
				sum.Add(q)
				out[k] = sum
			}
		}
	}
	return out
}

// chunks is how many whole chunks of perChunk have fills: the proposal's
// rule, the least over the dimensions a chunk asks for, floored; 0 when
// a chunk asks for nothing.
func chunks(have, perChunk corev1.ResourceList) int64 {
	n := int64(-1)
	for name, per := range perChunk {
		if per.Sign() <= 0 {
			continue
		}
		k := fits(have[name], per)
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// boundSince is when the pod was scheduled: its PodScheduled=True
// transition, else its creation (the proposal's fallback).
func boundSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

// fillStart is when the buffer became ReadyForProvisioning=True as its
// stored status says; now when it is not (it becomes so in this pass).
func fillStart(obj *v1beta1.CapacityBuffer, now time.Time) time.Time {
	c := apimeta.FindStatusCondition(obj.Status.Conditions, v1beta1.ConditionReadyForProvisioning)
	if c == nil || c.Status != metav1.ConditionTrue || c.LastTransitionTime.IsZero() {
		return now
	}
	return c.LastTransitionTime.Time
}

// measure advances a resolved one-shot buffer: the chunks its bound
// matching pods took since it became ready (never fewer than before),
// those its pending matching pods are about to take, and whether it is
// now Fulfilled or Expired. pods are the namespace's pods.
func (b *Buffer) measure(pods []*corev1.Pod, latched oneShot, ev evaluators, claimTemplate func(string) *resourceapi.ResourceClaimTemplate, now time.Time) error {
	o := latched
	o.Consumed = max(o.Consumed, ptr.Deref(b.Obj.Status.ConsumedReplicas, 0))
	// Whole seconds, as the condition's time is stored.
	o.FillStart = fillStart(b.Obj, now).Truncate(time.Second)
	sel, desc, err := matchSelector(b.Obj, b.Template)
	if err != nil {
		return err
	}
	o.Selector = desc
	tmpl := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.Obj.Namespace, Labels: b.Template.Labels}, Spec: b.Template.Spec}
	per := chunkOf(tmpl, ev, claimTemplate)
	bound, pending := corev1.ResourceList{}, corev1.ResourceList{}
	add := func(to corev1.ResourceList, pod *corev1.Pod) {
		for k, q := range chunkOf(pod, ev, claimTemplate) {
			sum := to[k]
			sum.Add(q)
			to[k] = sum
		}
	}
	for _, pod := range pods {
		if pod.Namespace != b.Obj.Namespace || len(pod.Spec.SchedulingGates) > 0 || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		switch {
		case pod.Spec.NodeName != "":
			// Pods bound before the buffer was ready took capacity it
			// did not provision.
			if !boundSince(pod).Before(o.FillStart) {
				add(bound, pod)
			}
		case pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodPending:
			add(pending, pod)
		}
	}
	target := int64(b.Wanted)
	o.Consumed = int32(max(int64(o.Consumed), min(chunks(bound, per), target)))
	o.InFlight = int32(min(chunks(pending, per), target-int64(o.Consumed)))
	d := b.Obj.Spec.FillDeadlineSeconds
	switch {
	case o.Consumed >= b.Wanted:
		o.Consumed, o.Terminal = b.Wanted, v1beta1.ConditionFulfilled
	case d != nil && *d > 0 && !now.Before(o.FillStart.Add(time.Duration(*d)*time.Second)):
		o.Terminal = v1beta1.ConditionExpired
	}
	b.OneShot = &o
	return nil
}

// remaining is what the buffer asks to hold in this pass: all of it, or
// for a one-shot buffer what is neither consumed nor about to be.
func (b *Buffer) remaining() int32 {
	if b.OneShot == nil {
		return b.Wanted
	}
	if b.OneShot.Terminal != "" {
		return 0
	}
	return max(b.Wanted-b.OneShot.Consumed-b.OneShot.InFlight, 0)
}

// terminalStatus is the status of a one-shot buffer that ended: its
// terminal condition, Provisioning=False with the same reason, nothing
// held. A buffer whose stored status says so already is left as it is.
func (b *Buffer) terminalStatus() v1beta1.CapacityBufferStatus {
	o := b.OneShot
	if apimeta.IsStatusConditionTrue(b.Obj.Status.Conditions, o.Terminal) &&
		ptr.Deref(b.Obj.Status.ConsumedReplicas, -1) == o.Consumed {
		return *b.Obj.Status.DeepCopy()
	}
	st := *b.Obj.Status.DeepCopy()
	gen := b.Obj.Generation
	set := func(typ, reason, msg string, status metav1.ConditionStatus) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: trim(msg), ObservedGeneration: gen})
	}
	st.ProvisioningStrategy = ptr.To(b.Obj.Strategy())
	if b.Template != nil {
		// Resolved in this pass (it ended in the pass it was measured).
		st.PodTemplateRef, st.PodTemplateGeneration = b.TemplateRef, b.Generation
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1beta1.ConditionReadyForProvisioning, Status: metav1.ConditionTrue,
			Reason: ReasonResolved, Message: fmt.Sprintf("%d pod(s) of the pod template of %s", b.Wanted, b.source()),
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(o.FillStart)})
	}
	st.ConsumedReplicas = ptr.To(o.Consumed)
	st.Replicas, st.ReadyReplicas = ptr.To(o.Consumed), ptr.To(o.Consumed)
	by := "its bound pods"
	if o.Selector != "" {
		by = fmt.Sprintf("its bound pods (%s)", o.Selector)
	}
	if o.Terminal == v1beta1.ConditionFulfilled {
		msg := fmt.Sprintf("all %d chunk(s) consumed by %s; the one-shot buffer holds nothing more", o.Consumed, by)
		set(v1beta1.ConditionFulfilled, ReasonBufferFilled, msg, metav1.ConditionTrue)
		set(v1beta1.ConditionProvisioning, ReasonBufferFilled, msg, metav1.ConditionFalse)
		return st
	}
	msg := fmt.Sprintf("not filled within spec.fillDeadlineSeconds (%ds from %s): %d of %d chunk(s) consumed by %s; "+
		"the one-shot buffer holds nothing more", ptr.Deref(b.Obj.Spec.FillDeadlineSeconds, 0), o.FillStart.UTC().Format(time.RFC3339),
		o.Consumed, b.Wanted, by)
	set(v1beta1.ConditionExpired, ReasonDeadlineExceed, msg, metav1.ConditionTrue)
	set(v1beta1.ConditionProvisioning, ReasonDeadlineExceed, msg, metav1.ConditionFalse)
	return st
}

// fillNote tells how far a one-shot buffer is filled, for the
// ReadyForProvisioning message.
func (b *Buffer) fillNote() string {
	o := b.OneShot
	if o == nil {
		return ""
	}
	by := "no pod fills it (no " + v1beta1.MatchSelectorAnnotation + " annotation, no template labels)"
	if o.Selector != "" {
		by = "pods " + o.Selector + " fill it"
	}
	note := fmt.Sprintf("; one-shot: %d consumed, %d to hold; %s", o.Consumed, b.Wanted-o.Consumed, by)
	if d := b.Obj.Spec.FillDeadlineSeconds; d != nil {
		note += fmt.Sprintf("; expires at %s unless filled", o.FillStart.Add(time.Duration(*d)*time.Second).UTC().Format(time.RFC3339))
	}
	return note
}
