package buffers

import (
	"context"
	"errors"
	"fmt"
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

func servedBuffer(fit, planned, unplaced int, ups ...string) *Buffer {
	return &Buffer{Obj: &v1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", Generation: 2},
		Spec: v1beta1.CapacityBufferSpec{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr.To[int32](4)}},
		TemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Generation: ptr.To[int64](5), Wanted: 4, Replicas: int32(fit + planned + unplaced),
		Active: true, Fit: fit, Planned: planned, Unplaced: unplaced, Why: "g: max-nodes-total", ScaleUps: ups}
}

func TestStatus(t *testing.T) {
	limited := servedBuffer(2, 0, 0)
	limited.Quota = "q: pods has room for 2"
	inactive := servedBuffer(0, 0, 0)
	inactive.Active, inactive.Until = false, time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	invalid := servedBuffer(0, 0, 0)
	invalid.NotReady, invalid.Message = ReasonTemplateNotFound, "PodTemplate ns/t not found"
	unreadable := servedBuffer(0, 0, 0)
	unreadable.QuotaErr = `resourcequotas is forbidden: cannot list resource "resourcequotas"`
	rejected := servedBuffer(0, 0, 0)
	rejected.NotReady, rejected.Message = ReasonPodRejected, "the API server's admission rejects a pod of the buffer's template: ValidatingAdmissionPolicy 'no-gpu' denied request"
	for _, tc := range []struct {
		name   string
		b      *Buffer
		failed map[string]error
		unsafe string
		want   []string // Type=Status/Reason in order
		msg    string   // part of Provisioning's message
	}{
		{"all fit", servedBuffer(4, 0, 0), nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=False/WithinQuotas", "Provisioning=True/CapacityAvailable"}, "all 4 pod(s)"},
		{"scale-up", servedBuffer(1, 3, 0, "g +1"), nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=False/WithinQuotas", "Provisioning=True/ScaleUpTriggered"}, "3 on new nodes: g +1"},
		{"scale-up failed", servedBuffer(1, 3, 0, "g +1"), map[string]error{"g": errors.New("quota exhausted")}, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=False/WithinQuotas", "Provisioning=False/ScaleUpFailed"}, "quota exhausted"},
		{"unsafe", servedBuffer(1, 3, 0, "g +1"), nil, "too many unready nodes", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=False/WithinQuotas", "Provisioning=False/ScaleUpNotMade"}, "too many unready"},
		{"no room", servedBuffer(1, 0, 3), nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=False/WithinQuotas", "Provisioning=False/CapacityNotFound"}, "max-nodes-total"},
		{"limited", limited, nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=True/QuotaExceeded", "Provisioning=True/CapacityAvailable"}, ""},
		{"inactive", inactive, nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "Provisioning=False/OutsideActiveWindows"}, "until 2026-12-07T20:00:00Z"},
		{"not ready", invalid, nil, "", []string{"ReadyForProvisioning=False/PodTemplateNotFound", "Provisioning=False/NotReadyForProvisioning"}, "not found"},
		{"quotas unreadable", unreadable, nil, "", []string{"ReadyForProvisioning=True/AttributesSetSuccessfully", "LimitedByQuotas=True/QuotaListFailed", "Provisioning=False/QuotaListFailed"}, "cannot list resource"},
		{"rejected by admission", rejected, nil, "", []string{"ReadyForProvisioning=False/PodRejectedByAdmission", "Provisioning=False/NotReadyForProvisioning"}, "ValidatingAdmissionPolicy 'no-gpu'"},
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
			switch {
			case tc.b.NotReady != "" && (st.Replicas != nil || st.PodTemplateRef != nil):
				t.Errorf("a buffer not ready holds %v replicas of %v", st.Replicas, st.PodTemplateRef)
			case tc.b.NotReady == "" && (*st.Replicas != tc.b.Replicas && tc.b.Active || st.PodTemplateRef.Name != "t" || *st.PodTemplateGeneration != 5):
				t.Errorf("status %+v does not say what is held", st)
			}
		})
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
