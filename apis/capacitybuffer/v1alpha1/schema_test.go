package v1alpha1

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/apis/capacitybuffer/v1beta1"
)

// The CRD serves both versions without conversion: their schemas must
// be the same. A fully set v1beta1 object reads into v1alpha1 with no
// field unknown and writes back unchanged.
func TestSameSchemaAsV1beta1(t *testing.T) {
	l := v1beta1.ResourceList{"cpu": resource.MustParse("4")}
	in := v1beta1.CapacityBuffer{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "n"},
		Spec: v1beta1.CapacityBufferSpec{ProvisioningStrategy: ptr.To(v1beta1.ActiveCapacity),
			PodTemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, ScalableRef: &v1beta1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "d"},
			Replicas: ptr.To[int32](1), Percentage: ptr.To[int32](2), Limits: &l,
			RefillStrategy: ptr.To(v1beta1.RefillNone), FillDeadlineSeconds: ptr.To[int32](60)},
		Status: v1beta1.CapacityBufferStatus{PodTemplateRef: &v1beta1.LocalObjectRef{Name: "t"}, Replicas: ptr.To[int32](3), ReadyReplicas: ptr.To[int32](2), ConsumedReplicas: ptr.To[int32](1),
			PodTemplateGeneration: ptr.To[int64](4), ProvisioningStrategy: ptr.To(v1beta1.ActiveCapacity),
			Conditions: []metav1.Condition{{Type: "Provisioning", Status: "True", Reason: "R", Message: "m",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), ObservedGeneration: 5}}},
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var out CapacityBuffer
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("v1beta1 does not read as v1alpha1: %v", err)
	}
	back, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, back) {
		t.Errorf("round trip changed the object:\n%s\n%s", data, back)
	}
}
