package reserved

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
)

func TestBest(t *testing.T) {
	pods := []*corev1.Pod{{}, {}}
	opt := func(group, ct string, nodes, reserved int, price float64) expander.Option {
		return expander.Option{NodeGroup: group, NodeCount: nodes, ReservedNodes: reserved, CapacityType: ct, Price: price, Pods: pods}
	}
	tests := []struct {
		name    string
		options []expander.Option
		want    []string
	}{
		{"reserved before on-demand and spot", []expander.Option{
			opt("a-spot", "spot", 2, 0, 1), opt("b-ondemand", "on-demand", 2, 0, 4), opt("c-reserved", "reserved", 2, 2, -1)}, []string{"c-reserved"}},
		{"on-demand before spot", []expander.Option{opt("a-spot", "spot", 2, 0, 1), opt("b-ondemand", "on-demand", 2, 0, 4)}, []string{"b-ondemand"}},
		{"unknown capacity type counts as on-demand", []expander.Option{opt("a", "", 2, 0, -1), opt("b", "on-demand", 2, 0, -1)}, []string{"a", "b"}},
		{"all on reservations before partly", []expander.Option{opt("a", "on-demand", 2, 1, -1), opt("b", "on-demand", 2, 2, -1)}, []string{"b"}},
		{"cheaper reservation wins when all are priced", []expander.Option{opt("a", "reserved", 2, 2, 10), opt("b", "reserved", 2, 2, 4)}, []string{"b"}},
		{"no price: both reserved kept", []expander.Option{opt("a", "reserved", 2, 2, -1), opt("b", "reserved", 2, 2, 4)}, []string{"a", "b"}},
		{"on-demand ties left to the next expander", []expander.Option{opt("a", "on-demand", 2, 0, 10), opt("b", "on-demand", 2, 0, 4)}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range New().Best(tc.options) {
				got = append(got, o.NodeGroup)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
