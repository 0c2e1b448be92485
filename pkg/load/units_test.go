package load

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// Upcoming nodes of a group of units carry their unit's domain: a unit
// registered in part first (its known value), then a placeholder per unit
// still to come; groups without units get their template as it is.
func TestUpcomingTemplates(t *testing.T) {
	const clique = "nvidia.com/gpu.clique"
	tmpl := func(annotations map[string]string) *cloudprovider.NodeTemplate {
		n := builder.Node("t").Obj()
		n.Annotations = annotations
		return &cloudprovider.NodeTemplate{Node: n}
	}
	units := map[string]string{cloudprovider.AnnotationUnitSize: "4", cloudprovider.AnnotationTopologyPerRequest: clique}
	in := func(name, value string) *corev1.Node { return builder.Node(name).Label(clique, value).Obj() }
	tests := []struct {
		name     string
		g        *nodegroups.Info
		upcoming int
		want     []string // clique of each upcoming node ("" none)
	}{
		{name: "no units", g: &nodegroups.Info{Id: "g", Template: tmpl(nil)}, upcoming: 2, want: []string{"", ""}},
		{name: "per-request labels without units", g: &nodegroups.Info{Id: "g", Template: tmpl(map[string]string{cloudprovider.AnnotationTopologyPerRequest: clique})},
			upcoming: 1, want: []string{""}},
		{name: "two units to come", g: &nodegroups.Info{Id: "g", Template: tmpl(units)}, upcoming: 8,
			want: []string{"booting unit 0 of g", "booting unit 0 of g", "booting unit 0 of g", "booting unit 0 of g",
				"booting unit 1 of g", "booting unit 1 of g", "booting unit 1 of g", "booting unit 1 of g"}},
		{name: "a unit registered in part, then a new one", g: &nodegroups.Info{Id: "g", Template: tmpl(units),
			Ready: []*corev1.Node{in("a1", "a"), in("a2", "a"), in("b1", "b"), in("b2", "b"), in("b3", "b"), in("b4", "b")}, Booting: []*corev1.Node{in("a3", "a")}},
			upcoming: 5, want: []string{"a", "booting unit 0 of g", "booting unit 0 of g", "booting unit 0 of g", "booting unit 0 of g"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tm := range upcomingTemplates(tc.g, tc.upcoming) {
				got = append(got, tm.Node.Labels[clique])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("cliques (-want +got):\n%s", diff)
			}
			if _, has := tc.g.Template.Node.Labels[clique]; has {
				t.Error("the group's template was changed")
			}
		})
	}
}
