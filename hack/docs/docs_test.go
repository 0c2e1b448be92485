package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

// The committed references must be what the code generates: run `make
// docs` after changing a flag or a metric.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	for name, want := range Generate() {
		got, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
		if err != nil {
			t.Fatalf("%v (run make docs)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/%s is stale: run make docs", name)
		}
	}
}

// Every registered metric has a row, and nothing else does.
func TestMetricsDocListsTheRegistry(t *testing.T) {
	doc := string(Metrics(metrics.New().Describe()))
	rows := regexp.MustCompile("(?m)^\\| `(cluster_autoscaler_[a-z_]+)`").FindAllStringSubmatch(doc, -1)
	ds := metrics.New().Describe()
	if len(rows) != len(ds) || len(ds) == 0 {
		t.Fatalf("%d rows for %d metrics", len(rows), len(ds))
	}
	for i, d := range ds {
		if rows[i][1] != d.Name {
			t.Errorf("row %d is %s, want %s", i, rows[i][1], d.Name)
		}
	}
}
