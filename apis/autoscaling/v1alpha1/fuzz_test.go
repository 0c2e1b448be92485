package v1alpha1

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzCapacityReservation: any object the API server may hold (written
// without our CRD's schema) converts and validates with an error, or
// not; never a panic.
func FuzzCapacityReservation(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"autoscaling.dra-autoscaler.io/v1alpha1","kind":"CapacityReservation","metadata":{"name":"r"},"spec":{"type":"CapacityBlock","count":4,"nodeGroups":["gpu"],"startTime":"2030-01-01T00:00:00Z","endTime":"2030-01-02T00:00:00Z"}}`,
		`{"spec":{"count":-1,"startTime":"2030-01-02T00:00:00Z","endTime":"2030-01-01T00:00:00Z"}}`,
		`{"spec":{"count":"four","nodeGroups":{"a":1}}}`,
		`{"spec":{"type":"Open","count":1e400}}`,
		`{"spec":[],"status":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obj map[string]any
		if json.Unmarshal(data, &obj) != nil {
			return
		}
		cr, err := FromUnstructured(&unstructured.Unstructured{Object: obj})
		if err != nil {
			return
		}
		_ = cr.Validate()
	})
}
