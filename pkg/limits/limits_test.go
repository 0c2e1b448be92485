package limits

import (
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestMaxNewNodes(t *testing.T) {
	node := builder.Node("t").CPU("8").Memory("32Gi").Obj()
	tests := []struct {
		name       string
		opts       func(*config.Options)
		provider   *cloudprovider.ResourceLimiter
		existing   int
		want       int
		wantReason string
	}{
		{"no limits bind", func(*config.Options) {}, nil, 3, 5, ""},
		{"max nodes total counts existing", func(o *config.Options) { o.MaxNodesTotal = 5 }, nil, 3, 2, ReasonMaxNodesTotal},
		{"already over", func(o *config.Options) { o.MaxNodesTotal = 2 }, nil, 3, 0, ReasonMaxNodesTotal},
		{"cores", func(o *config.Options) { o.CoresTotal.Max = 40 }, nil, 3, 2, ReasonCoresTotal},
		{"memory GiB", func(o *config.Options) { o.MemoryTotal.Max = 100 }, nil, 1, 2, ReasonMemoryTotal},
		{"provider tighter", func(*config.Options) {}, cloudprovider.NewResourceLimiter(nil, map[string]int64{"cpu": 32}), 2, 2, ReasonCoresTotal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := config.Default()
			tc.opts(o)
			var u Usage
			u.Add(node, tc.existing)
			got, reason := New(o, tc.provider).MaxNewNodes(u, node, 5)
			if got != tc.want || reason != tc.wantReason {
				t.Fatalf("MaxNewNodes = %d (%q), want %d (%q)", got, reason, tc.want, tc.wantReason)
			}
		})
	}
}

// A Usage passed by value keeps its own planned nodes: a plan tried and
// dropped must not book nodes in its caller's.
func TestAddPlannedCopiesOnWrite(t *testing.T) {
	node := builder.Node("n").CPU("4").Memory("16Gi").Obj()
	var u Usage
	u.AddPlanned("a", node, 2)
	tried := u
	tried.AddPlanned("a", node, 3)
	tried.AddPlanned("b", node, 1)
	if u.Planned["a"] != 2 || u.Planned["b"] != 0 || u.Nodes != 2 {
		t.Errorf("caller's usage %+v, want 2 nodes planned in a only", u)
	}
	if tried.Planned["a"] != 5 || tried.Planned["b"] != 1 || tried.Nodes != 6 || tried.MilliCPU != 24000 {
		t.Errorf("tried usage %+v, want a=5 b=1, 6 nodes, 24 cores", tried)
	}
}
