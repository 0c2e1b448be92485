package eligibility

import (
	"strconv"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/utilization"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// FuzzScaleDownDisabled: only a value that parses as false lets the node
// be considered; any other value keeps it, with a warning when it is not
// a boolean.
func FuzzScaleDownDisabled(f *testing.F) {
	for _, s := range []string{"true", "false", "False", "no", "0", "", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		node := builder.Node("n").Obj()
		node.Annotations = map[string]string{ScaleDownDisabledAnnotation: v}
		out := Check(node, utilization.NodeUtilization{}, Thresholds{}, true)
		b, err := strconv.ParseBool(v)
		kept := out.Reason == ScaleDownDisabled
		switch {
		case err == nil && !b && kept:
			t.Fatalf("%q: kept: %+v", v, out)
		case (err != nil || b) && !kept:
			t.Fatalf("%q: not kept: %+v", v, out)
		case err != nil && out.Warning == "":
			t.Fatalf("%q: no warning for a value that is not a boolean", v)
		}
	})
}
