package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/test/controlplane"
)

var (
	docRow   = regexp.MustCompile("(?m)^\\| `(cluster_autoscaler_[a-z_]+)` \\| [a-z]+ \\| (.*?) \\|")
	helpLine = regexp.MustCompile(`(?m)^# HELP (cluster_autoscaler_[a-z_]+) `)
)

// checkMetricsDoc compares docs/metrics.md with what the binary exports:
// every exported cluster_autoscaler_* metric is documented, and every
// documented one is exported, except labelled vectors that have no sample
// yet (Prometheus exports a vector only once it has a child: a backoff, a
// pod not helped, ...).
func checkMetricsDoc(t *testing.T, exposition string) {
	t.Helper()
	root, err := controlplane.ModuleRoot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{} // name -> has labels
	for _, m := range docRow.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = m[2] != "—"
	}
	exported := map[string]bool{}
	for _, m := range helpLine.FindAllStringSubmatch(exposition, -1) {
		exported[m[1]] = true
	}
	var undocumented, missing []string
	for name := range exported {
		if _, ok := documented[name]; !ok {
			undocumented = append(undocumented, name)
		}
	}
	for name, labelled := range documented {
		if !exported[name] && !labelled {
			missing = append(missing, name)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(missing)
	if len(undocumented) > 0 {
		t.Errorf("exported but not in docs/metrics.md: %s", strings.Join(undocumented, ", "))
	}
	if len(missing) > 0 {
		t.Errorf("in docs/metrics.md but not exported: %s", strings.Join(missing, ", "))
	}
	if len(exported) == 0 || len(documented) == 0 {
		t.Errorf("%d metrics exported, %d documented", len(exported), len(documented))
	}
}
