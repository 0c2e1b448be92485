// Package deploy holds the manifests; its test keeps the Grafana dashboard
// honest: every metric it queries is one the autoscaler registers.
package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
)

var metricName = regexp.MustCompile(`cluster_autoscaler_[a-z_]+`)

func TestDashboardQueriesRegisteredMetrics(t *testing.T) {
	data, err := os.ReadFile("grafana/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	registered := map[string]string{}
	for _, d := range metrics.New().Describe() {
		registered[d.Name] = d.Type
	}
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q reads no cluster_autoscaler_* metric", p.Title, target.Expr)
			}
			for _, n := range names {
				queried++
				if !isRegistered(n, registered) {
					t.Errorf("panel %q queries %s, which the autoscaler does not register", p.Title, n)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries nothing")
	}
}

// isRegistered accepts a histogram's series (_bucket, _sum, _count).
func isRegistered(name string, registered map[string]string) bool {
	if _, ok := registered[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] == "histogram" {
			return true
		}
	}
	return false
}
