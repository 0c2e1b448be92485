package v1beta1

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzCapacityBuffer: any object the API server may hold (stored without
// our CRD's schema) converts and validates with an error, or not; never a
// panic.
func FuzzCapacityBuffer(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"autoscaling.x-k8s.io/v1beta1","kind":"CapacityBuffer","metadata":{"name":"b","namespace":"n"},"spec":{"podTemplateRef":{"name":"t"},"replicas":4}}`,
		`{"spec":{"scalableRef":{"apiGroup":"apps","kind":"Deployment","name":"d"},"percentage":50,"limits":{"cpu":"4"}}}`,
		`{"spec":{"replicas":"four","limits":{"cpu":"x"}}}`,
		`{"spec":{"replicas":1e400,"percentage":-3}}`,
		`{"spec":[],"status":"x"}`,
		`{"spec":{"podTemplateRef":{"name":"t"},"scalableRef":{"kind":"","name":""}},"status":{"conditions":[{"type":1}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		b, err := FromUnstructured(&unstructured.Unstructured{Object: obj})
		if err != nil {
			return
		}
		_ = b.Validate()
		_ = b.Strategy()
	})
}
