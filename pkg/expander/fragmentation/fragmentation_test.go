package fragmentation_test

import (
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander/leastnodes"
)

func TestPrefersLeastStranded(t *testing.T) {
	stranded := map[string]float64{"mig-7": 0.14, "mig-4-3": 0, "shared-80g": 0.5}
	score := func(o expander.Option) float64 { return stranded[o.NodeGroup] }
	opts := []expander.Option{{NodeGroup: "mig-7", NodeCount: 1}, {NodeGroup: "mig-4-3", NodeCount: 2}, {NodeGroup: "shared-80g", NodeCount: 1}}
	if got := (expander.Chain{fragmentation.New(score)}).Choose(opts); got.NodeGroup != "mig-4-3" {
		t.Errorf("chose %s, want mig-4-3", got.NodeGroup)
	}
	// In a chain, ties go on to the next strategy.
	stranded["mig-7"] = 0
	if got := (expander.Chain{fragmentation.New(score), leastnodes.New()}).Choose(opts); got.NodeGroup != "mig-7" {
		t.Errorf("chose %s, want mig-7 (fewer nodes among the least stranded)", got.NodeGroup)
	}
}
