package reservations

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

type provider struct {
	cloudprovider.CloudProvider
	res []cloudprovider.ReservedCapacity
	err error
}

func (p provider) Reservations() ([]cloudprovider.ReservedCapacity, error) { return p.res, p.err }

// countWith counts group "a" (nodes a-a, a-b, a-c) against res.
func countWith(t *testing.T, opts Options, res ...cloudprovider.ReservedCapacity) *Count {
	s := New(opts, provider{res: res}, nil, nil)
	g := &nodegroups.Info{Id: "a", Target: 3, Ready: nodes("a", 3), Template: &cloudprovider.NodeTemplate{Node: tmpl("on-demand")}}
	return s.Count(context.Background(), []*nodegroups.Info{g}, nil, now)
}

func TestScaleDownKeepAndRank(t *testing.T) {
	two := cloudprovider.ReservedCapacity{ID: "r", Kind: cloudprovider.ReservationTargeted, NodeGroups: []string{"a"}, Count: 2}
	ending := cloudprovider.ReservedCapacity{ID: "b", Kind: cloudprovider.ReservationCapacityBlock, NodeGroups: []string{"a"}, Count: 2,
		Start: now.Add(-time.Hour), End: now.Add(10 * time.Minute)}
	node := func(name string) *corev1.Node { return builder.Node(name).Obj() }
	tests := []struct {
		name     string
		opts     Options
		res      cloudprovider.ReservedCapacity
		node     string
		wantKeep bool
		wantRank int
	}{
		{"reserved node kept", Options{EndMargin: 30 * time.Minute}, two, "a-a", true, 1},
		{"second reserved node kept", Options{EndMargin: 30 * time.Minute}, two, "a-b", true, 1},
		{"node beyond the reservation goes, first", Options{EndMargin: 30 * time.Minute}, two, "a-c", false, 0},
		{"flag lets reserved nodes go", Options{EndMargin: 30 * time.Minute, ScaleDownReserved: true}, two, "a-a", false, 1},
		{"node of an ending block is not kept", Options{EndMargin: 30 * time.Minute}, ending, "a-a", false, 1},
		{"unknown node", Options{}, two, "elsewhere", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sd := countWith(t, tc.opts, tc.res)
			reason, keep := sd.Keep(node(tc.node), now)
			if keep != tc.wantKeep || keep && reason != ReasonReservedCapacity {
				t.Errorf("Keep = %q, %v; want keep %v", reason, keep, tc.wantKeep)
			}
			if got := sd.Rank(node(tc.node), now); got != tc.wantRank {
				t.Errorf("Rank = %d, want %d", got, tc.wantRank)
			}
		})
	}
	var none *Count
	if _, keep := none.Keep(node("a-a"), now); keep {
		t.Error("a nil stage keeps nodes")
	}
}
