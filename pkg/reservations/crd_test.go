package reservations

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.dra-autoscaler.io/v1alpha1", "kind": "CapacityReservation",
		"metadata": map[string]any{"name": "r", "uid": "u1", "generation": int64(1)},
		"spec":     spec,
	}}
}

func TestFromObjects(t *testing.T) {
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string // "" means accepted
	}{
		{"valid block", map[string]any{"type": "CapacityBlock", "nodeGroups": []any{"a"}, "count": int64(2),
			"start": "2026-01-01T10:00:00Z", "end": "2026-01-01T14:00:00Z", "pricePerNodeHour": "12.5"}, ""},
		{"negative count", map[string]any{"nodeGroups": []any{"a"}, "count": int64(-1)}, "spec.count (-1) must not be negative"},
		{"end before start", map[string]any{"nodeGroups": []any{"a"}, "count": int64(1),
			"start": "2026-01-01T14:00:00Z", "end": "2026-01-01T10:00:00Z"}, "must be after spec.start"},
		{"block without end", map[string]any{"type": "CapacityBlock", "nodeGroups": []any{"a"}, "count": int64(1),
			"start": "2026-01-01T10:00:00Z"}, "needs both spec.start and spec.end"},
		// Groups may name the reservation themselves (a label on a
		// MachineDeployment), so an object may name none.
		{"no group", map[string]any{"count": int64(2), "start": "2026-01-01T10:00:00Z", "end": "2026-01-01T14:00:00Z",
			"pricePerNodeHour": "12.5"}, ""},
		{"unknown type", map[string]any{"type": "Forever", "nodeGroups": []any{"a"}, "count": int64(1)}, `spec.type "Forever"`},
		{"count not a number", map[string]any{"nodeGroups": []any{"a"}, "count": "lots"}, "malformed object"},
		{"time not a time", map[string]any{"nodeGroups": []any{"a"}, "count": int64(1), "start": "soon"}, "malformed object"},
		{"groups not a list", map[string]any{"nodeGroups": map[string]any{"x": int64(1)}, "count": int64(1)}, "malformed object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, _, rejected := FromObjects([]*unstructured.Unstructured{object(tc.spec)})
			if tc.wantErr == "" {
				if len(rejected) != 0 || len(res) != 1 {
					t.Fatalf("rejected: %v", rejected)
				}
				if r := res[0]; r.Count != 2 || r.End.Sub(r.Start).Hours() != 4 || r.Price != 12.5 || !r.HasPrice {
					t.Errorf("converted to %+v", r)
				}
				return
			}
			if len(rejected) != 1 || !strings.Contains(rejected[0].Err.Error(), tc.wantErr) {
				t.Fatalf("rejected %v, want an error containing %q", rejected, tc.wantErr)
			}
		})
	}
}
