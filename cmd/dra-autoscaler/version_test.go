package main

import (
	"io"
	"os"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/version"
)

// --version prints the stamped version and returns before anything else
// runs: no kubeconfig, no cloud config, no flag checks beyond parsing.
func TestVersionFlag(t *testing.T) {
	tests := []struct {
		name, stamped string
		args          []string
	}{
		{"release", "0.1.0", []string{"--version"}},
		{"unstamped build", "dev", []string{"--version"}},
		// Options that would fail to start are not looked at.
		{"with a missing cloud config", "1.2.3-rc.1", []string{"--cloud-config=/nonexistent.yaml", "--version"}},
		{"with a bad range", "0.2.0", []string{"--version=true", "--cores-total=9:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func(v string, args []string, out *os.File) { version.Version, os.Args, os.Stdout = v, args, out }(version.Version, os.Args, os.Stdout)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			version.Version, os.Args, os.Stdout = tc.stamped, append([]string{"dra-autoscaler"}, tc.args...), w
			main()
			_ = w.Close()
			out, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := "dra-autoscaler " + tc.stamped + "\n"; string(out) != want {
				t.Errorf("--version printed %q, want %q", out, want)
			}
		})
	}
}
