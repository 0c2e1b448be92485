package gang

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
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
	gangs, loose, waiting := Split(pending, all, groups, nil)

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

func TestSplitComposites(t *testing.T) {
	member := func(name, group string) *builder.PodBuilder { return builder.Pod("ns", name).PodGroup(group) }
	composites := []*schedulingv1alpha3.CompositePodGroup{
		builder.CompositePodGroup("ns", "job").MinGroupCount(2).TopologyKey("block").Obj(),
		builder.CompositePodGroup("ns", "stage").Parent("job").Obj(),
		builder.CompositePodGroup("ns", "loop-a").Parent("loop-b").Obj(),
		builder.CompositePodGroup("ns", "loop-b").Parent("loop-a").Obj(),
	}
	groups := []*schedulingv1beta1.PodGroup{
		builder.PodGroup("ns", "worker-a").MinCount(2).TopologyKey("rack").Parent("job").Obj(),
		builder.PodGroup("ns", "worker-b").MinCount(2).TopologyKey("rack").Parent("stage").Obj(),
		builder.PodGroup("ns", "orphan").MinCount(1).Parent("missing").Obj(),
		builder.PodGroup("ns", "looped").MinCount(1).Parent("loop-a").Obj(),
		builder.PodGroup("ns", "short").MinCount(3).Parent("short-job").Obj(),
		builder.PodGroup("ns", "plain").MinCount(1).Obj(),
	}
	composites = append(composites, builder.CompositePodGroup("ns", "short-job").Obj())
	running := member("worker-a-0", "worker-a").Node("n1").Obj()
	pending := []*corev1.Pod{
		member("worker-a-1", "worker-a").Obj(),
		member("worker-b-0", "worker-b").Obj(), member("worker-b-1", "worker-b").Obj(),
		member("orphan-0", "orphan").Obj(), member("looped-0", "looped").Obj(),
		member("short-0", "short").Obj(), member("plain-0", "plain").Obj(),
	}
	all := append([]*corev1.Pod{running}, pending...)

	t.Run("gate on", func(t *testing.T) {
		gangs, loose, waiting := Split(pending, all, groups, composites)
		if len(loose) != 0 {
			t.Errorf("loose = %v", loose)
		}
		if got := names(gangs); len(got) != 2 || got[0] != "ns/CompositePodGroup/job" || got[1] != "ns/plain" {
			t.Fatalf("gangs = %v, want ns/CompositePodGroup/job (the whole tree) and ns/plain", got)
		}
		job := gangs[0]
		if !job.Composite || job.TopologyKey != "block" || len(job.Pending) != 3 || job.MinCount != 4 || job.Bound != 1 || job.Need() != 3 {
			t.Errorf("job = %+v", job)
		}
		var why []string
		for _, w := range waiting {
			why = append(why, w.Name+": "+w.Reason)
		}
		if len(waiting) != 3 {
			t.Fatalf("waiting = %q, want orphan (missing parent), looped and short-job", why)
		}
		for i, want := range []string{"looped: the CompositePodGroups above PodGroup ns/looped form a loop",
			"orphan: CompositePodGroup ns/missing (above PodGroup ns/orphan) does not exist",
			"short-job: CompositePodGroup ns/short-job waits for its pods to be created"} {
			if !strings.HasPrefix(why[i], want) {
				t.Errorf("waiting[%d] = %q, want %q...", i, why[i], want)
			}
		}
	})
	t.Run("gate off: parents ignored", func(t *testing.T) {
		gangs, _, _ := Split(pending, all, groups, nil)
		if got := names(gangs); len(got) != 5 || slices.Contains(got, "ns/job") {
			t.Errorf("gangs = %v, want the five PodGroups on their own", got)
		}
	})
}
