package reservations

import (
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// FuzzExpectedRuntime: a pod's expected-runtime annotation is a
// non-negative duration or not declared at all.
func FuzzExpectedRuntime(f *testing.F) {
	for _, s := range []string{"2h", "90m", "-1h", "forever", "9223372036854775807ns", "1e9h", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		pod := builder.Pod("ns", "p").Obj()
		pod.Annotations = map[string]string{AnnotationExpectedRuntime: v}
		d, ok := ExpectedRuntime(pod)
		if ok && d < 0 {
			t.Fatalf("%q read as %s", v, d)
		}
		// Whatever is not read is named, in a bounded message.
		if _, err := ParseExpectedRuntime(pod); (err == nil) != ok || err != nil && len(err.Error()) > 512 {
			t.Fatalf("%q: read %v, error %v", v, ok, err)
		}
	})
}
