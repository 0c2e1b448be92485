package buffers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
)

// servedBuffer is a buffer of 4 pods of template t as a pass served it.
func servedBuffer(fit, planned, unplaced int, ups ...string) *Buffer {
	return &Buffer{Obj: &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", Generation: 2},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr.To[int32](4)}},
		TemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Generation: ptr.To[int64](5), Wanted: 4, Replicas: int32(fit + planned + unplaced),
		Active: true, Fit: fit, Planned: planned, Unplaced: unplaced, Why: "g: node-group-max-size: room for 0 more node(s)", ScaleUps: ups}
}

// with edits a served buffer.
func with(b *Buffer, edit func(*Buffer)) *Buffer {
	edit(b)
	return b
}

func TestStatus(t *testing.T) {
	ready := func(n int) func(*Buffer) { return func(b *Buffer) { b.ReadyFit = n } }
	const (
		resolved = "ReadyForProvisioning=True/AttributesSetSuccessfully"
		within   = "LimitedByQuotas=False/ResourceQuotasAllocated"
		cut      = "LimitedByQuotas=True/ResourceQuotasAllocated"
	)
	for _, tc := range []struct {
		name   string
		b      *Buffer
		failed map[string]error
		unsafe string
		want   []string // Type=Status/Reason in order
		msg    string   // part of Provisioning's message
		ready  *int32   // status.readyReplicas
	}{
		{"all fit, ready now", with(servedBuffer(4, 0, 0), ready(4)), nil, "", []string{resolved, within, "Provisioning=True/FitsExistingCapacity"},
			"all 4 pod(s) fit existing or upcoming nodes (4 on nodes Ready now)", ptr.To[int32](4)},
		{"all fit, some on upcoming nodes", with(servedBuffer(4, 0, 0), ready(1)), nil, "", []string{resolved, within, "Provisioning=True/FitsExistingCapacity"},
			"(1 on nodes Ready now)", ptr.To[int32](1)},
		{"new nodes coming", with(servedBuffer(1, 3, 0, "g +1"), ready(1)), nil, "", []string{resolved, within, "Provisioning=False/RequiresNewCapacity"},
			"3 on new nodes: g +1", ptr.To[int32](1)},
		{"no room for now", servedBuffer(1, 0, 3), nil, "", []string{resolved, within, "Provisioning=False/RequiresNewCapacity"},
			"3 find no room for now: g: node-group-max-size", ptr.To[int32](0)},
		{"no template can hold them", with(servedBuffer(1, 0, 3), func(b *Buffer) { b.Infeasible, b.Why = 3, "cpu: NodeResourcesFit: Insufficient memory" }),
			nil, "", []string{resolved, within, "Provisioning=False/Infeasible"}, "3 pod(s) fit no node group's template, so no node can be added for them: cpu: NodeResourcesFit: Insufficient memory", ptr.To[int32](0)},
		{"scale-up failed", servedBuffer(1, 3, 0, "g +1"), map[string]error{"g": errors.New("quota exhausted")}, "",
			[]string{resolved, within, "Provisioning=False/ScaleUpFailed"}, "quota exhausted", ptr.To[int32](0)},
		{"unsafe", servedBuffer(1, 3, 0, "g +1"), nil, "too many unready nodes", []string{resolved, within, "Provisioning=False/ScaleUpNotMade"}, "too many unready", ptr.To[int32](0)},
		{"limited", with(servedBuffer(2, 0, 0), func(b *Buffer) { b.Quota = "q: pods has room for 2" }), nil, "",
			[]string{resolved, cut, "Provisioning=True/FitsExistingCapacity"}, "", ptr.To[int32](0)},
		{"quotas leave nothing", with(servedBuffer(0, 0, 0), func(b *Buffer) { b.Quota = "q: pods has room for 0" }), nil, "",
			[]string{resolved, cut, "Provisioning=False/BufferEmpty"}, "room for no pod: q: pods", ptr.To[int32](0)},
		{"zero replicas", with(servedBuffer(0, 0, 0), func(b *Buffer) { b.Wanted = 0 }), nil, "", []string{resolved, within, "Provisioning=False/BufferEmpty"}, "0 pods", ptr.To[int32](0)},
		{"inactive", with(servedBuffer(0, 0, 0), func(b *Buffer) { b.Active, b.Until = false, time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC) }), nil, "",
			[]string{resolved, "Provisioning=False/OutsideActiveWindows"}, "until 2026-12-07T20:00:00Z", ptr.To[int32](0)},
		{"not ready", with(servedBuffer(0, 0, 0), func(b *Buffer) { b.NotReady, b.Message = ReasonTemplateNotFound, "PodTemplate ns/t not found" }), nil, "",
			[]string{"ReadyForProvisioning=False/PodTemplateNotFound", "Provisioning=False/NotReadyForProvisioning"}, "not found", nil},
		{"quotas unreadable", with(servedBuffer(0, 0, 0), func(b *Buffer) { b.QuotaErr = `resourcequotas is forbidden: cannot list resource "resourcequotas"` }), nil, "",
			[]string{resolved, "LimitedByQuotas=True/QuotaListFailed", "Provisioning=False/QuotaListFailed"}, "cannot list resource", ptr.To[int32](0)},
		{"rejected by admission", with(servedBuffer(0, 0, 0), func(b *Buffer) {
			b.NotReady, b.Message = ReasonPodRejected, "the API server's admission rejects a pod of the buffer's template: ValidatingAdmissionPolicy 'no-gpu' denied request"
		}), nil, "", []string{"ReadyForProvisioning=False/PodRejectedByAdmission", "Provisioning=False/NotReadyForProvisioning"}, "ValidatingAdmissionPolicy 'no-gpu'", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.b.Status(tc.failed, tc.unsafe)
			var got []string
			for _, c := range st.Conditions {
				got = append(got, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
				if c.ObservedGeneration != 2 {
					t.Errorf("%s observedGeneration %d, want 2", c.Type, c.ObservedGeneration)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("conditions %q, want %q", got, tc.want)
			}
			if c := meta.FindStatusCondition(st.Conditions, v1beta1.ConditionProvisioning); c == nil || !strings.Contains(c.Message, tc.msg) {
				t.Errorf("Provisioning %+v, want a message with %q", c, tc.msg)
			}
			if *st.ProvisioningStrategy != v1beta1.ActiveCapacity {
				t.Errorf("strategy %q", *st.ProvisioningStrategy)
			}
			if !reflect.DeepEqual(st.ReadyReplicas, tc.ready) {
				t.Errorf("readyReplicas %v, want %v", ptr.Deref(st.ReadyReplicas, -1), ptr.Deref(tc.ready, -1))
			}
			switch {
			case tc.b.NotReady != "" && (st.Replicas != nil || st.PodTemplateRef != nil):
				t.Errorf("a buffer not ready holds %v replicas of %v", st.Replicas, st.PodTemplateRef)
			case tc.b.NotReady == "" && (*st.Replicas != tc.b.Replicas && tc.b.Active || st.PodTemplateRef.Name != "t" || *st.PodTemplateGeneration != 5):
				t.Errorf("status %+v does not say what is held", st)
			}
		})
	}
}

// A buffer shaped by its status (neither ref: a controller of the user's
// names the PodTemplate) keeps that name when it is not ready: it is the
// buffer's input, not ours to clear.
func TestStatusKeepsTheStatusShape(t *testing.T) {
	b := servedBuffer(0, 0, 0)
	b.Obj.Spec = v1beta1.CapacityBufferSpec{Limits: &v1beta1.ResourceList{}}
	b.Obj.Status.PodTemplateRef = &v1beta1.LocalObjectRef{Name: "made-by-a-controller"}
	b.NotReady, b.Message = ReasonTemplateNotFound, "PodTemplate ns/made-by-a-controller (status.podTemplateRef) not found"
	st := b.Status(nil, "")
	if st.PodTemplateRef == nil || st.PodTemplateRef.Name != "made-by-a-controller" || st.Replicas != nil {
		t.Errorf("status %+v, want the controller's podTemplateRef kept and no replicas", st)
	}
}

// The patch removes what the status leaves unset: a merge patch that
// omitted them would keep the old values.
func TestStatusPatchRemovesUnsetFields(t *testing.T) {
	data, err := statusPatch(v1beta1.CapacityBufferStatus{Replicas: ptr.To[int32](2)}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	st := got["status"]
	if st["replicas"] != float64(2) {
		t.Errorf("replicas %v, want 2", st["replicas"])
	}
	for _, f := range []string{"podTemplateRef", "readyReplicas", "podTemplateGeneration"} {
		if v, ok := st[f]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", f, v, ok)
		}
	}
	// A buffer shaped by its status: its podTemplateRef is left alone.
	data, err = statusPatch(v1beta1.CapacityBufferStatus{}, true)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["status"]["podTemplateRef"]; ok {
		t.Errorf("patch %s touches the podTemplateRef of a buffer shaped by its status", data)
	}
}

// Write patches the status subresource only when it changed.
func TestWriteOnlyChanges(t *testing.T) {
	b := servedBuffer(4, 0, 0)
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(b.Obj)
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1beta1.SchemeGroupVersion.String())
	u.SetKind(v1beta1.Kind)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{v1beta1.Resource: "CapacityBufferList"}, u)
	p := New(nil, dyn, nil)
	out := &PassOutcome{Buffers: []*Buffer{b}}
	p.Write(context.Background(), out, []act.LaunchResult{{ScaleUp: act.ScaleUp{Group: &nodegroups.Info{Id: "other"}}}}, "")
	patches := func() int {
		n := 0
		for _, a := range dyn.Actions() {
			if pa, ok := a.(clienttesting.PatchAction); ok && pa.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	if patches() != 1 {
		t.Fatalf("%d status patches, want 1: %v", patches(), dyn.Actions())
	}
	// The next pass reads the written status back: nothing changed.
	b.Obj.Status = b.Status(nil, "")
	p.Write(context.Background(), out, nil, "")
	if patches() != 1 {
		t.Errorf("%d status patches after an unchanged pass, want still 1", patches())
	}
}

// A buffer that holds nothing because of its namespace's quotas or its
// pod's admission gets a Warning event naming why, once.
func TestWriteWarnsWhyNothingIsHeld(t *testing.T) {
	unreadable := servedBuffer(0, 0, 0)
	unreadable.QuotaErr = "resourcequotas is forbidden"
	rejected := servedBuffer(0, 0, 0)
	rejected.Obj = rejected.Obj.DeepCopy()
	rejected.Obj.Name = "r"
	rejected.NotReady, rejected.Message = ReasonPodRejected, "ValidatingAdmissionPolicy 'no-gpu' denied request"
	var objs []runtime.Object
	for _, b := range []*Buffer{unreadable, rejected} {
		obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(b.Obj)
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(v1beta1.SchemeGroupVersion.String())
		u.SetKind(v1beta1.Kind)
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{v1beta1.Resource: "CapacityBufferList"}, objs...)
	recorder := record.NewFakeRecorder(10)
	p := New(nil, dyn, recorder)
	out := &PassOutcome{Buffers: []*Buffer{unreadable, rejected}}
	p.Write(context.Background(), out, nil, "")
	var events []string
	for len(recorder.Events) > 0 {
		events = append(events, <-recorder.Events)
	}
	want := []string{"Warning QuotaListFailed ", "Warning PodRejectedByAdmission "}
	if len(events) != len(want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(events[i], w) {
			t.Errorf("event %q, want %q...", events[i], w)
		}
	}
	if !strings.Contains(events[1], "'no-gpu'") || !strings.Contains(events[0], "forbidden") {
		t.Errorf("events %q do not say why", events)
	}
	// The next pass reads its status back: nothing new to tell.
	unreadable.Obj.Status, rejected.Obj.Status = unreadable.Status(nil, ""), rejected.Status(nil, "")
	p.Write(context.Background(), out, nil, "")
	if n := len(recorder.Events); n != 0 {
		t.Errorf("%d more event(s) for an unchanged pass", n)
	}
}

// Events keep upstream's names: TriggeredScaleUp when new nodes are asked
// for the buffer, NotTriggerScaleUp when pods find no room (infeasible or
// for now); a buffer held by what exists says nothing.
func TestWriteEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    *Buffer
		want []string // event reasons
	}{
		{"fits", servedBuffer(4, 0, 0), nil},
		{"new nodes", servedBuffer(1, 3, 0, "g +1"), []string{"Normal TriggeredScaleUp"}},
		{"no room for now", servedBuffer(1, 0, 3), []string{"Normal NotTriggerScaleUp"}},
		{"some planned, some without room", servedBuffer(1, 2, 1, "g +1"), []string{"Normal TriggeredScaleUp", "Normal NotTriggerScaleUp"}},
		{"infeasible", with(servedBuffer(0, 0, 4), func(b *Buffer) { b.Infeasible = 4 }), []string{"Normal NotTriggerScaleUp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.b.Obj)
			u := &unstructured.Unstructured{Object: obj}
			u.SetAPIVersion(v1beta1.SchemeGroupVersion.String())
			u.SetKind(v1beta1.Kind)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{v1beta1.Resource: "CapacityBufferList"}, u)
			recorder := record.NewFakeRecorder(10)
			New(nil, dyn, recorder).Write(context.Background(), &PassOutcome{Buffers: []*Buffer{tc.b}}, nil, "")
			var got []string
			for len(recorder.Events) > 0 {
				e := strings.Fields(<-recorder.Events)
				got = append(got, e[0]+" "+e[1])
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
