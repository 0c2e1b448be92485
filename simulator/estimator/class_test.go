package estimator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
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
	// ClassOf is ClassKey and Memoizable of a copy, and keeps nothing.
	fresh := New(r, Options{})
	for _, p := range append(slices.Clone(pods), friendly) {
		cp := *p
		key, memoizable := fresh.ClassOf(&cp)
		if want := e.ClassKey(p); key != want || memoizable != e.Memoizable(p) {
			t.Errorf("ClassOf(%s) = %q, %v; ClassKey %q, Memoizable %v", p.Name, key, memoizable, want, e.Memoizable(p))
		}
	}
	if n := len(fresh.cache.entries) + len(fresh.cache.prev); n != 0 {
		t.Errorf("ClassOf kept %d entries", n)
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

// Each field of a pod the filters read splits classes: a pod changed in
// one of them gets another class key than the pod it was copied from.
func TestClassKeyFields(t *testing.T) {
	r, _ := newRunner(t)
	e := New(r, Options{})
	base := builder.Pod(ns, "base").CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").Obj()
	priority, policy := int32(7), v1.PreemptNever
	changes := map[string]func(*v1.Pod){
		"namespace": func(p *v1.Pod) { p.Namespace = "other" },
		"label":     func(p *v1.Pod) { p.Labels = map[string]string{"app": "x"} },
		"owner":     func(p *v1.Pod) { p.OwnerReferences[0].UID = "other" },
		"requests": func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = builder.Node("x").CPU("2").Obj().Status.Allocatable[v1.ResourceCPU]
		},
		"host port":      func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{HostPort: 80, ContainerPort: 80}} },
		"init container": func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "init"}} },
		"node selector":  func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"pool": "a"} },
		"toleration":     func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Key: "gpu", Operator: v1.TolerationOpExists}} },
		"node affinity": func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpExists}}}}}}}
		},
		"soft spread": func(p *v1.Pod) {
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway}}
		},
		"volume": func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		},
		"host network":      func(p *v1.Pod) { p.Spec.HostNetwork = true },
		"priority":          func(p *v1.Pod) { p.Spec.Priority = &priority },
		"preemption policy": func(p *v1.Pod) { p.Spec.PreemptionPolicy = &policy },
		"os":                func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} },
		"overhead": func(p *v1.Pod) {
			p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]}
		},
		"pod-level requests": func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU]}}
		},
	}
	key := e.ClassKey(base)
	if key == "" {
		t.Fatal("no class key for the base pod")
	}
	if again := e.ClassKey(base.DeepCopy()); again != key {
		t.Fatalf("a copy of the pod has key %q, the pod %q", again, key)
	}
	for what, change := range changes {
		p := base.DeepCopy()
		p.UID = types.UID("changed-" + strings.ReplaceAll(what, " ", "-"))
		change(p)
		if k := e.ClassKey(p); k == "" || k == key {
			t.Errorf("%s changed: key %q, the base pod's %q", what, k, key)
		}
	}
}

// Gang members share a class across gangs when their groups own no claims
// (no Filter reads the group then); a group that owns claims, or one the
// snapshot lacks, keeps its members to themselves.
func TestInertGroups(t *testing.T) {
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("GenericWorkload=false"); err != nil {
			t.Error(err)
		}
	})
	r, err := framework.New(context.Background(), framework.Options{FeatureGates: "GenericWorkload=true"})
	if err != nil {
		t.Fatal(err)
	}
	s := r.Snapshot()
	snapshottest.Load(t, s, classes()...)
	snapshottest.Load(t, s,
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.PodGroup(ns, "job-1").MinCount(2).Obj(),
		builder.PodGroup(ns, "job-2").MinCount(2).Obj(),
		builder.PodGroup(ns, "owns-claim").MinCount(2).ClaimFromTemplate("shared", "one-gpu").Obj(),
	)
	member := func(name, group string) *v1.Pod {
		return builder.Pod(ns, name).CPU("1").PodGroup(group).ClaimFromTemplate("dev", "one-gpu").Obj()
	}
	loose := builder.Pod(ns, "loose").CPU("1").ClaimFromTemplate("dev", "one-gpu").Obj()
	e := New(r, Options{})
	for _, tc := range []struct {
		name       string
		a, b       *v1.Pod
		same       bool
		memoizable bool // of a
	}{
		{name: "members of two inert groups", a: member("job-1-0", "job-1"), b: member("job-2-0", "job-2"), same: true, memoizable: true},
		{name: "an inert member and a pod of no group", a: member("job-1-1", "job-1"), b: loose, memoizable: true},
		{name: "a group owning a claim", a: member("owns-0", "owns-claim"), b: member("owns-1", "owns-claim")},
		{name: "a group not in the snapshot", a: member("lost-0", "lost"), b: member("lost-1", "lost")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := e.ClassKey(tc.a), e.ClassKey(tc.b)
			if !tc.memoizable {
				// Their verdicts may change as other members are placed.
				if ka != "" || kb != "" {
					t.Errorf("class keys %q, %q, want none", ka, kb)
				}
				return
			}
			if ka == "" || (ka == kb) != tc.same {
				t.Errorf("class keys %q and %q, want same=%v", ka, kb, tc.same)
			}
			if !e.Memoizable(tc.a) {
				t.Errorf("%s not memoizable", tc.a.Name)
			}
		})
	}
}

// ClassifyAll keys pods side by side as ClassKey keys them one at a time
// (and classify as it does one at a time):
// every pod gets the key and memoizable verdict a fresh estimator gives
// it, read off the cache ClassifyAll filled (pods with no class are left
// out of it), the second time from the entries the first made. The pods
// are enough to be split between goroutines, and share claims: run with
// -race.
func TestClassifyAll(t *testing.T) {
	r, _ := newRunner(t)
	s := r.Snapshot()
	snapshottest.Load(t, s, classes()...)
	snapshottest.Load(t, s,
		builder.ClaimTemplate(ns, "one-gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.ClaimTemplate(ns, "two-gpus").Request(builder.Request("gpu", "gpu").Count(2)).Obj(),
		builder.Claim(ns, "shared").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.Claim(ns, "own").Request(builder.Request("gpu", "gpu")).Obj(),
	)
	kinds := []func(name string) *v1.Pod{
		func(n string) *v1.Pod {
			return builder.Pod(ns, n).CPU("1").OwnedBy("apps/v1", "ReplicaSet", "rs").ClaimFromTemplate("dev", "one-gpu").Obj()
		},
		func(n string) *v1.Pod {
			return builder.Pod(ns, n).CPU("2").OwnedBy("apps/v1", "ReplicaSet", "rs").ClaimFromTemplate("dev", "two-gpus").Obj()
		},
		func(n string) *v1.Pod { return builder.Pod(ns, n).CPU("1").Claim("dev", "shared").Obj() },
		func(n string) *v1.Pod { return builder.Pod(ns, n).CPU("1").Claim("dev", "own").Obj() },
		func(n string) *v1.Pod { return builder.Pod(ns, n).CPU("1").Claim("dev", "not-there").Obj() },
		func(n string) *v1.Pod {
			return builder.Pod(ns, n).CPU("1").ClaimFromTemplate("dev", "no-template").Obj()
		},
		func(n string) *v1.Pod {
			// A quantity behind a pointer, its text not cached: keying
			// marshals it.
			p := builder.Pod(ns, n).Memory("1Gi").Label("app", "cache").Obj()
			limit := resource.NewQuantity(1<<30, resource.BinarySI)
			p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: limit}}}}
			return p
		},
		func(n string) *v1.Pod {
			// Spread that is not best-effort: no class.
			p := builder.Pod(ns, n).CPU("1").Label("app", "spread").Obj()
			p.Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
				WhenUnsatisfiable: v1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}}
			return p
		},
		func(n string) *v1.Pod {
			return builder.Pod(ns, n).CPU("1").Label("app", "near").RequiredAffinity("zone", "app", "near", nil).Obj()
		},
	}
	var pods []*v1.Pod
	for i := range 1200 {
		pods = append(pods, kinds[i%len(kinds)](fmt.Sprintf("p-%d", i)))
	}
	// classify keys side by side too: the same order and classes as one
	// pod at a time.
	got, err := newClassCache().classify(s, pods, true)
	if err != nil {
		t.Fatal(err)
	}
	classifyAtLeast = len(pods) + 1
	want, err := newClassCache().classify(s, pods, true)
	classifyAtLeast = 256
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.pods {
		g, w := got.classOf[i], want.classOf[i]
		if got.pods[i] != want.pods[i] || g.key != w.key || g.id != w.id || g.memoizable != w.memoizable || g.fitsLater != w.fitsLater {
			t.Fatalf("classified side by side, pod %d is %s of class %d %q, one at a time %s of class %d %q", i, got.pods[i].Name, g.id, g.key,
				want.pods[i].Name, w.id, w.key)
		}
	}
	fresh := New(r, Options{})
	e := New(r, Options{})
	for round := range 2 {
		e.ClassifyAll(pods)
		for _, p := range pods {
			want := fresh.ClassKey(p)
			entry, cached := e.cache.entries[p]
			switch {
			case want == "" && cached:
				t.Fatalf("round %d: pod %s has no class, ClassifyAll keyed it %q", round, p.Name, entry.key)
			case want != "" && !cached:
				t.Fatalf("round %d: ClassifyAll left pod %s out", round, p.Name)
			case want != "" && (entry.key != want || e.Memoizable(p) != fresh.Memoizable(p)):
				t.Fatalf("round %d: pod %s keyed %q (memoizable %v), one at a time %q (%v)", round, p.Name, entry.key,
					e.Memoizable(p), want, fresh.Memoizable(p))
			}
		}
	}
}

// BenchmarkClassOf keys pods as scale-down moves them (D1's: one claim
// each, made already, released): each a new copy, keyed by content.
func BenchmarkClassOf(b *testing.B) {
	r, _ := newRunner(b)
	s := r.Snapshot()
	snapshottest.Load(b, s, classes()...)
	var pods []*v1.Pod
	for i := range 256 {
		name := fmt.Sprintf("moved-%d", i)
		p := builder.Pod(ns, name).CPU("640m").Memory("5Gi").OwnedBy("apps/v1", "ReplicaSet", "rs").Label("app", "web").
			ClaimFromTemplate("gpu", "one-gpu").ClaimStatus("gpu", name+"-gpu").Obj()
		snapshottest.Load(b, s, builder.Claim(ns, name+"-gpu").Request(builder.Request("gpu", "gpu")).OwnedByPod(p, "gpu").Obj())
		pods = append(pods, p)
	}
	e := New(r, Options{})
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pods {
			cp := *p
			if key, memoizable := e.ClassOf(&cp); key == "" || !memoizable {
				b.Fatalf("pod %s: no memoizable class", p.Name)
			}
		}
	}
}
