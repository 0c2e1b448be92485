package drainability

import (
	"strconv"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// FuzzSafeToEvict: a pod says safe-to-evict=true exactly when the value
// parses as true; anything else that is set keeps it (Blocks), with a
// warning when it is not a boolean at all.
func FuzzSafeToEvict(f *testing.F) {
	for _, s := range []string{"true", "false", "TRUE", "yes", "1", "", "tru\x00e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		pod := builder.Pod("ns", "p").Obj()
		pod.Annotations = map[string]string{SafeToEvictAnnotation: v, SafeToEvictLocalVolumesAnnotation: v}
		out := Rules{}.Check(pod, false)
		b, err := strconv.ParseBool(v)
		switch {
		case err == nil && b:
			if out.Verdict != Moves {
				t.Fatalf("%q: %+v, want Moves", v, out)
			}
		case out.Verdict != Blocks:
			t.Fatalf("%q: %+v, want Blocks", v, out)
		case err != nil && out.Warning == "":
			t.Fatalf("%q: no warning for a value that is not a boolean", v)
		}
	})
}
