package priority

import "testing"

// FuzzParse: the priority expander's ConfigMap document is refused or
// gives entries whose patterns compiled.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"10:\n- gpu-.*\n50:\n- gpu-8x-reserved\n", "10: [\"(\"]\n", "x: [a]\n", "10: a\n", "-5:\n- .*\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		entries, err := parse(doc)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.pattern == nil {
				t.Fatalf("entry %+v without a pattern", e)
			}
		}
	})
}
