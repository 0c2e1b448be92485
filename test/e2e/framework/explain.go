package framework

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// WriteKwokConfig writes a kwok provider config (marshalled to YAML) to a
// file of the test and returns its path.
func WriteKwokConfig(t testing.TB, cfg any) string {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Explain runs `dra-autoscaler explain` against this cluster with the kwok
// provider configured by kwokConfig, and returns its exit code and stdout
// (stderr, the logs, only when it fails).
func (c *Cluster) Explain(t testing.TB, kwokConfig any, args ...string) (int, string, string) {
	t.Helper()
	return c.ExplainWith(t, append([]string{"--cloud-provider=kwok", "--cloud-config=" + WriteKwokConfig(t, kwokConfig)}, args...)...)
}

// ExplainWith runs `dra-autoscaler explain` against this cluster with
// args alone (the provider's flags included), as Explain does.
func (c *Cluster) ExplainWith(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	// The cluster's gates, as the running autoscalers have them.
	all := append([]string{"explain", "--kubeconfig=" + c.Kubeconf, "--feature-gates=" + *featureGates}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.AutoscalerBinary(t), all...)
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), stdout.String(), tail(stderr.String(), 40)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), ""
}
