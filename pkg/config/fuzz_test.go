package config

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzNodeGroupSpec: --nodes=min:max:name is refused, or is a spec with
// 0 <= min <= max and a name that prints back to the same spec.
func FuzzNodeGroupSpec(f *testing.F) {
	for _, s := range []string{"1:10:gpu-8x", "0:0:a", "3:1:x", "-1:2:y", "1:2:", "9223372036854775808:1:z", "1:2:a:b", ":::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseNodeGroupSpec(s)
		if err != nil {
			return
		}
		if g.Min < 0 || g.Max < g.Min || g.Name == "" {
			t.Fatalf("%q accepted as %+v", s, g)
		}
		back, err := ParseNodeGroupSpec(fmt.Sprintf("%d:%d:%s", g.Min, g.Max, g.Name))
		if err != nil || back != g {
			t.Fatalf("%q: %+v does not print back (%+v, %v)", s, g, back, err)
		}
	})
}

// FuzzRange: --cores-total and --memory-total.
func FuzzRange(f *testing.F) {
	for _, s := range []string{"0:320000", "5:1", "-1:3", "1:2:3", "x:y", "0:9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange("cores-total", s)
		if err == nil && (r.Min < 0 || r.Max < r.Min) {
			t.Fatalf("%q accepted as %+v", s, r)
		}
	})
}

// FuzzFlags: any command line is refused with an error or parsed; never a
// panic. Arguments are separated by NUL in the input.
func FuzzFlags(f *testing.F) {
	for _, s := range []string{
		"--scan-interval=10s\x00--nodes=1:10:gpu",
		"--expander=priority,least-waste\x00--max-nodes-total=-1",
		"--scan-interval=-1s\x00--scale-down-utilization-threshold=2",
		"--feature-gates=NoSuchGate=true\x00--cores-total=5:1",
		"--nodes=1:2\x00--max-graceful-termination-sec=99999999999999999999",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Parse(strings.Split(s, "\x00"))
	})
}
