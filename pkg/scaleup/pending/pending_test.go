package pending

import (
	"strings"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
)

func TestExpendableGangs(t *testing.T) {
	tests := []struct {
		name     string
		priority int32
		cutoff   int
		waits    bool
	}{
		{"above the cutoff", 0, -10, false},
		{"at the cutoff", -10, -10, false},
		{"below the cutoff: its PodGroup's priority rules", -20, -10, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &gang.Gang{Namespace: "ns", Name: "train", Priority: tc.priority}
			kept, waiting := expendable([]*gang.Gang{g}, nil, tc.cutoff)
			if tc.waits != (len(waiting) == 1) || tc.waits == (len(kept) == 1) {
				t.Fatalf("kept %d, waiting %+v", len(kept), waiting)
			}
			if tc.waits && !strings.Contains(waiting[0].Reason, "below --expendable-pods-priority-cutoff") {
				t.Errorf("reason %q", waiting[0].Reason)
			}
		})
	}
}
