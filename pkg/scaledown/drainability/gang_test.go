package drainability

import (
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// compositeWorld is a namespace of nested groups, a member per node:
//
//	job (All): worker (gang 2, Single) on n1 n2 n3; driver (gang 1) on n4
//	svc (Single, minGroupCount 2): a on n5, b on n6, c on n7
//	top (All): mid (Single, basic): leaf on n8; side on n9
//	l1 and l2 parent each other: loop on n10
func compositeWorld() *Gangs {
	pg := func(name string, min int32, parent string) *schedulingv1beta1.PodGroup {
		return builder.PodGroup("ml", name).MinCount(min).Disruption(false).Parent(parent).Obj()
	}
	groups := []*schedulingv1beta1.PodGroup{
		pg("worker", 2, "job"), pg("driver", 1, "job"),
		pg("a", 1, "svc"), pg("b", 1, "svc"), pg("c", 1, "svc"),
		pg("leaf", 1, "mid"), pg("side", 1, "top"),
		pg("loop", 1, "l1"),
	}
	composites := []*schedulingv1alpha3.CompositePodGroup{
		builder.CompositePodGroup("ml", "job").DisruptAll().Obj(),
		builder.CompositePodGroup("ml", "svc").MinGroupCount(2).Obj(),
		builder.CompositePodGroup("ml", "top").DisruptAll().Obj(),
		builder.CompositePodGroup("ml", "mid").Parent("top").Obj(),
		builder.CompositePodGroup("ml", "l1").Parent("l2").Obj(),
		builder.CompositePodGroup("ml", "l2").Parent("l1").Obj(),
	}
	return NewGangs(groups, composites, compositePods())
}

func compositePods() []*corev1.Pod {
	m := func(g, name, node string) *corev1.Pod { return builder.Pod("ml", name).PodGroup(g).Node(node).Obj() }
	return []*corev1.Pod{
		m("worker", "w0", "n1"), m("worker", "w1", "n2"), m("worker", "w2", "n3"), m("driver", "d0", "n4"),
		m("a", "a0", "n5"), m("b", "b0", "n6"), m("c", "c0", "n7"),
		m("leaf", "x0", "n8"), m("side", "y0", "n9"),
		m("loop", "z0", "n10"),
	}
}

func TestCompositeDisruption(t *testing.T) {
	gangs := compositeWorld()
	byName := map[string]*corev1.Pod{}
	for _, p := range compositePods() {
		byName[p.Name] = p
	}
	tests := []struct {
		name    string
		leaving []string // pods; their nodes are removed
		also    []string // more nodes removed, their pods not leaving
		blocked string
	}{
		{name: "a Single member above minCount, under an All composite", leaving: []string{"w0"}},
		{name: "a child taken below minCount", leaving: []string{"w0", "w1"}, blocked: "gang ml/worker"},
		{name: "a child moving whole still splits its All parent", leaving: []string{"w0", "w1", "w2"}, blocked: "composite pod group ml/job"},
		{name: "the All composite moves whole", leaving: []string{"w0", "w1", "w2", "d0"}},
		{name: "one child of three under a Single composite with minGroupCount 2", leaving: []string{"a0"}},
		{name: "two children of three break minGroupCount", leaving: []string{"a0", "b0"}, blocked: "composite pod group ml/svc"},
		{name: "a Single composite with no child left is disrupted, so its All parent", leaving: []string{"x0"}, blocked: "composite pod group ml/top"},
		{name: "the nested hierarchy moves whole", leaving: []string{"x0", "y0"}},
		{name: "a parent loop moves nothing", leaving: []string{"z0"}, blocked: "loop"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			removing := map[string]bool{}
			var leaving []*corev1.Pod
			for _, n := range tc.leaving {
				leaving = append(leaving, byName[n])
				removing[byName[n].Spec.NodeName] = true
			}
			got := gangs.Check(leaving, removing)
			if (got == "") != (tc.blocked == "") || !strings.Contains(got, tc.blocked) {
				t.Fatalf("Check = %q, want it to name %q", got, tc.blocked)
			}
		})
	}
}

func TestCompositeMemberNodes(t *testing.T) {
	gangs := compositeWorld()
	byName := map[string]*corev1.Pod{}
	for _, p := range compositePods() {
		byName[p.Name] = p
	}
	tests := []struct{ pod, want string }{
		{"w0", "n1,n2,n3,n4"}, // the worker's disruption disrupts job (All)
		{"a0", "n5"},          // svc keeps two running children
		{"x0", "n8,n9"},       // mid keeps none, so top (All) moves
		{"z0", ""},            // a loop: nothing moves
	}
	for _, tc := range tests {
		if got := strings.Join(gangs.MemberNodes([]*corev1.Pod{byName[tc.pod]}), ","); got != tc.want {
			t.Errorf("MemberNodes(%s) = %q, want %q", tc.pod, got, tc.want)
		}
	}
}

func TestHold(t *testing.T) {
	m := func(g, name, node string) *corev1.Pod { return builder.Pod("ml", name).PodGroup(g).Node(node).Obj() }
	pods := []*corev1.Pod{
		m("strict", "s0", "n1"), m("strict", "s1", "n2"), // All, on n1 n2
		m("chain", "c0", "n2"), m("chain", "c1", "n3"), m("chain", "c2", "n4"), // All, on n2 n3 n4
		m("spare", "p0", "n5"), m("spare", "p1", "n6"), m("spare", "p2", "n7"), // Single, minCount 2
		builder.Pod("ml", "loose").Node("n8").Obj(),
	}
	all := func(name string) *schedulingv1beta1.PodGroup {
		return builder.PodGroup("ml", name).MinCount(1).Disruption(true).Obj()
	}
	gangs := NewGangs([]*schedulingv1beta1.PodGroup{all("strict"), all("chain"),
		builder.PodGroup("ml", "spare").MinCount(2).Disruption(false).Obj()}, nil, pods)
	on := func(node string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == node {
				out = append(out, p)
			}
		}
		return out
	}
	tests := []struct {
		name     string
		draining []string
		held     string
	}{
		{name: "an All group whose nodes all drain moves whole", draining: []string{"n1", "n2", "n3", "n4"}},
		{name: "holding one node for a group can split another: both are held", draining: []string{"n1", "n2", "n3"}, held: "n1,n2,n3"},
		{name: "one node of a Single group above minCount", draining: []string{"n5"}},
		{name: "two nodes of a Single group leave too few: both held", draining: []string{"n5", "n6"}, held: "n5,n6"},
		{name: "pods of no group", draining: []string{"n8"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaving := map[string][]*corev1.Pod{}
			for _, n := range tc.draining {
				leaving[n] = on(n)
			}
			got := gangs.Hold(leaving)
			var names []string
			for n, reason := range got {
				if reason == "" {
					t.Errorf("node %s held without a reason", n)
				}
				names = append(names, n)
			}
			sort.Strings(names)
			if strings.Join(names, ",") != tc.held {
				t.Fatalf("held %v, want %s", got, tc.held)
			}
		})
	}
}
