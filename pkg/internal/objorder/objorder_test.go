package objorder

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		ns1, n1, ns2, n2 string
		want             int
	}{
		{"a", "x", "a", "y", -1},
		{"a", "y", "a", "x", 1},
		{"a", "x", "a", "x", 0},
		{"a", "z", "b", "a", -1},
		// "a/..." against "a-b/...": '-' sorts before '/'.
		{"a", "x", "a-b", "y", 1},
		{"a-b", "y", "a", "x", -1},
		// "a/..." against "a0/...": '/' sorts before '0'.
		{"a", "x", "a0", "a", -1},
		{"", "x", "a", "x", -1},
		// A "/" in a namespace (invalid) is compared as the joined strings.
		{"a", "b/c", "a/b", "a", 1},
		{"a/b", "a", "a", "b/c", -1},
	} {
		if got := Compare(tc.ns1, tc.n1, tc.ns2, tc.n2); got != tc.want {
			t.Errorf("Compare(%q, %q, %q, %q) = %d, want %d", tc.ns1, tc.n1, tc.ns2, tc.n2, got, tc.want)
		}
	}
}

// TestCompareAsJoined checks random names, over an alphabet around "/",
// against comparing the joined strings.
func TestCompareAsJoined(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		const alphabet = "-./0a"
		b := make([]byte, rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 100000 {
		ns1, n1, ns2, n2 := word(), word(), word(), word()
		want := strings.Compare(ns1+"/"+n1, ns2+"/"+n2)
		if got := Compare(ns1, n1, ns2, n2); got != want {
			t.Fatalf("Compare(%q, %q, %q, %q) = %d, joined strings compare %d", ns1, n1, ns2, n2, got, want)
		}
	}
}
