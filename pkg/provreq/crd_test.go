package provreq_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deploy/crds holds the module's CRDs byte for byte: `make crds` after a
// module bump, or this fails.
func TestDeployedCRDsMatchTheModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/autoscaler/cluster-autoscaler/apis").Output()
	if err != nil {
		t.Fatalf("go list the API module: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v)", src, err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", filepath.Base(f)))
		if err != nil {
			t.Errorf("deploy/crds lacks %s; run make crds: %v", filepath.Base(f), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/crds/%s differs from the module's; run make crds", filepath.Base(f))
		}
	}
}
