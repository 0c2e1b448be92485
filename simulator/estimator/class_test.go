package estimator

import (
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestClassify(t *testing.T) {
	r, _ := newRunner(t)
	s := r.Snapshot()
	snapshottest.Load(t, s, classes()...)
	snapshottest.Load(t, s,
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.ClaimTemplate(ns, "also-one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.ClaimTemplate(ns, "two-gpus").Request(builder.Request("gpu", "gpu").Count(2)).Obj(),
		builder.Claim(ns, "own-a").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.Claim(ns, "own-b").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.Claim(ns, "shared").Request(builder.Request("gpu", "gpu")).Obj(),
	)
	rs := func(name string) *builder.PodBuilder {
		return builder.Pod(ns, name).CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs")
	}
	pods := []*v1.Pod{
		rs("tmpl-a").ClaimFromTemplate("dev", "one-gpu").Obj(),
		rs("tmpl-b").ClaimFromTemplate("dev", "also-one-gpu").Obj(), // same spec, other template name
		rs("own-a").Claim("dev", "own-a").Obj(),
		rs("own-b").Claim("dev", "own-b").Obj(), // same spec, other claim
		rs("share-1").Claim("dev", "shared").Obj(),
		rs("share-2").Claim("dev", "shared").Obj(),
		rs("two").ClaimFromTemplate("dev", "two-gpus").Obj(),
		builder.Pod(ns, "other-owner").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "other").ClaimFromTemplate("dev", "one-gpu").Obj(),
		rs("big-cpu").CPU("8").Obj(),
		rs("small-cpu").Obj(),
		rs("sts-0").Label("statefulset.kubernetes.io/pod-name", "sts-0").Obj(),
		rs("sts-1").Label("statefulset.kubernetes.io/pod-name", "sts-1").Obj(),
		rs("labelled").Label("app", "x").Obj(),
	}
	order, err := newClassCache().classify(s, pods, true)
	if err != nil {
		t.Fatal(err)
	}
	class := map[string]*class{}
	var names []string
	for i, p := range order.pods {
		class[p.Name] = order.classOf[i]
		names = append(names, p.Name)
	}
	same := [][2]string{{"tmpl-a", "tmpl-b"}, {"own-a", "own-b"}, {"share-1", "share-2"}, {"sts-0", "sts-1"}, {"sts-0", "small-cpu"}}
	for _, pair := range same {
		if class[pair[0]] != class[pair[1]] {
			t.Errorf("%s and %s in different classes", pair[0], pair[1])
		}
	}
	differ := [][2]string{{"tmpl-a", "own-a"}, {"tmpl-a", "other-owner"}, {"tmpl-a", "two"}, {"own-a", "share-1"}, {"big-cpu", "small-cpu"}, {"small-cpu", "labelled"}}
	for _, pair := range differ {
		if class[pair[0]] == class[pair[1]] {
			t.Errorf("%s and %s in one class", pair[0], pair[1])
		}
	}
	if class["share-1"].memoizable || !class["tmpl-a"].memoizable || !class["own-a"].memoizable {
		t.Errorf("memoizable: shared %v, template %v, own %v", class["share-1"].memoizable, class["tmpl-a"].memoizable, class["own-a"].memoizable)
	}
	// First-fit decreasing: devices, then CPU, then memory; a class's
	// pods stay together; namespace/name breaks ties.
	want := []string{"two", "other-owner", "own-a", "own-b", "share-1", "share-2", "tmpl-a", "tmpl-b", "big-cpu", "labelled", "small-cpu", "sts-0", "sts-1"}
	if !slices.Equal(names, want) {
		t.Errorf("order %v\nwant  %v", names, want)
	}

	// ClassKey agrees with the estimator's classes, and refuses pods that
	// other placements can help.
	e := New(r, Options{})
	if a, b := e.ClassKey(pods[0]), e.ClassKey(pods[1]); a == "" || a != b || a != class["tmpl-a"].key {
		t.Errorf("ClassKey: %q and %q, class %q", a, b, class["tmpl-a"].key)
	}
	friendly := rs("friendly").Obj()
	friendly.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: v1.LabelHostname}}}}
	if k := e.ClassKey(friendly); k != "" {
		t.Errorf("ClassKey of a pod with required pod affinity: %q, want none", k)
	}

	// The cache hands back the same classes until a claim changes.
	again, err := newClassCache().classify(s, pods, true)
	if err != nil || again.classOf[0].key != order.classOf[0].key {
		t.Fatalf("a second classification differs: %v", err)
	}
	cache := newClassCache()
	if _, err := cache.classify(s, pods, true); err != nil {
		t.Fatal(err)
	}
	snapshottest.Load(t, s, builder.Claim(ns, "own-b").Request(builder.Request("gpu", "gpu").Count(3)).Obj())
	changed, err := cache.classify(s, pods, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range changed.pods {
		if p.Name == "own-b" && changed.classOf[i].accel != 3 {
			t.Errorf("cached class survived a claim change: accel %d", changed.classOf[i].accel)
		}
	}
}
