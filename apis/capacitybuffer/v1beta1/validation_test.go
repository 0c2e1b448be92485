package v1beta1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func TestValidate(t *testing.T) {
	tmpl := &LocalObjectRef{Name: "t"}
	dep := &ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "d"}
	for _, tc := range []struct {
		name string
		spec CapacityBufferSpec
		want string // "" valid, else part of the error
	}{
		{"template with replicas", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2)}, ""},
		{"template with limits", CapacityBufferSpec{PodTemplateRef: tmpl, Limits: &ResourceList{"cpu": resource.MustParse("4")}}, ""},
		{"scalable with percentage", CapacityBufferSpec{ScalableRef: dep, Percentage: ptr.To[int32](50)}, ""},
		// Upstream's schema allows neither ref: the shape then comes
		// from the status (the buffers package says so when it cannot).
		{"limits only", CapacityBufferSpec{Limits: &ResourceList{"cpu": resource.MustParse("4")}}, ""},
		{"neither ref nor count", CapacityBufferSpec{}, ""},
		{"both refs", CapacityBufferSpec{PodTemplateRef: tmpl, ScalableRef: dep, Replicas: ptr.To[int32](1)}, "only one of"},
		{"template without a count", CapacityBufferSpec{PodTemplateRef: tmpl}, "needs spec.replicas or spec.limits"},
		{"negative replicas", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](-1)}, "must not be negative"},
		{"negative limit", CapacityBufferSpec{PodTemplateRef: tmpl, Limits: &ResourceList{"cpu": resource.MustParse("-1")}}, "spec.limits[cpu]"},
		{"scalable without kind", CapacityBufferSpec{ScalableRef: &ScalableRef{Name: "d"}}, "kind and name"},
		{"recreate, said", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To(RefillRecreate)}, ""},
		{"one-shot", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To(RefillNone), FillDeadlineSeconds: ptr.To[int32](60)}, ""},
		{"unknown refill strategy", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To("recreateUpToLimit")}, `"recreateUpToLimit" is not one of recreate, none`},
		{"one-shot of a workload", CapacityBufferSpec{ScalableRef: dep, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To(RefillNone)}, "needs spec.podTemplateRef and spec.replicas"},
		{"one-shot without replicas", CapacityBufferSpec{PodTemplateRef: tmpl, Limits: &ResourceList{"cpu": resource.MustParse("4")}, RefillStrategy: ptr.To(RefillNone)}, "needs spec.podTemplateRef and spec.replicas"},
		{"one-shot with limits", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), Limits: &ResourceList{"cpu": resource.MustParse("4")}, RefillStrategy: ptr.To(RefillNone)}, "neither spec.limits nor spec.percentage"},
		{"zero deadline", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To(RefillNone), FillDeadlineSeconds: ptr.To[int32](0)}, "at least 1"},
		{"negative deadline", CapacityBufferSpec{PodTemplateRef: tmpl, Replicas: ptr.To[int32](2), RefillStrategy: ptr.To(RefillNone), FillDeadlineSeconds: ptr.To[int32](-5)}, "spec.fillDeadlineSeconds (-5)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&CapacityBuffer{Spec: tc.spec}).Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// An object written for upstream's CapacityBuffer converts unchanged,
// field by field.
func TestUpstreamObjectConverts(t *testing.T) {
	const doc = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: b, namespace: ns}
spec:
  provisioningStrategy: buffer.x-k8s.io/active-capacity
  scalableRef: {apiGroup: apps, kind: Deployment, name: web}
  replicas: 1
  percentage: 20
  limits: {cpu: "8", memory: 16Gi}
status:
  podTemplateRef: {name: web-template}
  replicas: 2
  readyReplicas: 1
  podTemplateGeneration: 3
  provisioningStrategy: buffer.x-k8s.io/active-capacity
  conditions:
  - {type: ReadyForProvisioning, status: "True", reason: AttributesSetSuccessfully, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z"}
`
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	b, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	s, st := b.Spec, b.Status
	if b.Strategy() != ActiveCapacity || s.ScalableRef.Kind != "Deployment" || *s.Replicas != 1 || *s.Percentage != 20 ||
		(*s.Limits)["memory"] != resource.MustParse("16Gi") {
		t.Errorf("spec converted wrongly: %+v", s)
	}
	if st.PodTemplateRef.Name != "web-template" || *st.Replicas != 2 || *st.ReadyReplicas != 1 || *st.PodTemplateGeneration != 3 ||
		len(st.Conditions) != 1 || st.Conditions[0].Type != ConditionReadyForProvisioning {
		t.Errorf("status converted wrongly: %+v", st)
	}
}
