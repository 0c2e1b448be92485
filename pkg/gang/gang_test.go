package gang

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestSplit(t *testing.T) {
	member := func(name, group string) *builder.PodBuilder { return builder.Pod("ns", name).PodGroup(group) }
	groups := []*schedulingv1beta1.PodGroup{
		builder.PodGroup("ns", "train").MinCount(4).TopologyKey("rack").Priority(10).Obj(),
		builder.PodGroup("ns", "small").MinCount(2).Obj(),
		builder.PodGroup("ns", "basic").Obj(),
		builder.PodGroup("ns", "early").MinCount(4).Obj(),
	}
	running := member("train-0", "train").Node("n1").Obj()
	// Held on the node it is nominated for: placed, as a bound member.
	held := member("train-3", "train").Nominated("n2").Obj()
	pending := []*corev1.Pod{
		// Nominated for a node that is not registered: still pending.
		member("train-1", "train").Nominated("gone").Obj(), member("train-2", "train").Obj(),
		member("small-0", "small").Obj(), member("small-1", "small").Obj(),
		member("basic-0", "basic").Obj(),
		member("early-0", "early").Obj(),
		member("orphan-0", "missing").Obj(),
		builder.Pod("ns", "alone").Obj(),
	}
	all := append([]*corev1.Pod{running, held}, pending...)
	gangs, loose, waiting := Split(pending, all, groups)

	if len(gangs) != 2 || gangs[0].Name != "train" || gangs[1].Name != "small" {
		t.Fatalf("gangs = %v, want train (priority 10) then small", names(gangs))
	}
	train := gangs[0]
	if train.MinCount != 4 || train.Bound != 2 || len(train.Pending) != 2 || train.Need() != 2 || train.TopologyKey != "rack" {
		t.Errorf("train = %+v", train)
	}
	if len(loose) != 2 || loose[0].Name != "basic-0" || loose[1].Name != "alone" {
		t.Errorf("loose = %v, want basic-0 and alone", loose)
	}
	if len(waiting) != 2 || waiting[0].Name != "early" || waiting[1].Name != "missing" {
		t.Fatalf("waiting = %+v, want early (too few members) and missing (no PodGroup)", waiting)
	}
	if waiting[0].Reason == "" || waiting[1].Reason == "" {
		t.Error("waiting without a reason")
	}
}

func names(gangs []*Gang) []string {
	var out []string
	for _, g := range gangs {
		out = append(out, g.Key())
	}
	return out
}
