package fragmentation

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestShapes(t *testing.T) {
	r, ctx := newRunner(t)
	load(t, r, migNode("n1"))
	running := place(t, ctx, r, "running", "s2", "n1")
	placed, _ := r.Snapshot().PlacedPod(ns, running.Name)
	pending := []*v1.Pod{podFor("a", "s3"), podFor("b", "s3"), podFor("c", "whole")}
	s := NewShapes(time.Hour)
	t0 := time.Unix(0, 0)
	s.Observe(r.Snapshot(), append([]*v1.Pod{placed}, pending...), t0)
	got := s.Active(t0)
	if len(got) != 3 {
		t.Fatalf("%d shapes, want 3 (2 slices, 3 slices, whole)", len(got))
	}
	if got[0].size != 3 || got[len(got)-1].size != 1 {
		t.Errorf("shapes not largest first: sizes %d..%d", got[0].size, got[len(got)-1].size)
	}
	cached := s.byPod[pending[0].UID].shape
	s.Observe(r.Snapshot(), pending[:1], t0.Add(30*time.Minute))
	if s.byPod[pending[0].UID].shape != cached {
		t.Error("unchanged pod's shape computed again")
	}
	if len(s.byPod) != 1 {
		t.Errorf("%d pods cached, want only the one observed last", len(s.byPod))
	}
	// Shapes not seen for longer than the retention are forgotten.
	if got := s.Active(t0.Add(80 * time.Minute)); len(got) != 1 || got[0].Key != cached.Key {
		t.Errorf("after retention: %d shapes, want the one seen recently", len(got))
	}
	if _, ok := ShapeOf(r.Snapshot(), placed, false); ok {
		t.Error("an allocated claim counted as a new request")
	}
}

// Pods with claims of their own but equal specs share one shape; a spec
// that differs makes another.
func TestShapesByContent(t *testing.T) {
	r, _ := newRunner(t)
	claim := func(name, profileName string, count int64) *resourceapi.ResourceClaim {
		return builder.Claim(ns, name).Request(profile("gpu", profileName).Count(count)).Obj()
	}
	load(t, r, migNode("n1"), []any{claim("a", "1g", 2), claim("b", "1g", 2), claim("c", "1g", 3), claim("d", "whole", 2)})
	var pods []*v1.Pod
	for _, name := range []string{"a", "b", "c", "d"} {
		pods = append(pods, builder.Pod(ns, name).Claim("dev", name).Obj())
	}
	s := NewShapes(time.Hour)
	s.Observe(r.Snapshot(), pods, time.Unix(0, 0))
	shape := func(i int) *Shape { return s.byPod[pods[i].UID].shape }
	if shape(0) == nil || shape(0) != shape(1) {
		t.Errorf("equal specs: shapes %p and %p, want one", shape(0), shape(1))
	}
	for _, i := range []int{2, 3} {
		if shape(i) == nil || shape(i).Key == shape(0).Key {
			t.Errorf("pod %s: shape %v, want one of its own", pods[i].Name, shape(i))
		}
	}
	if got := len(s.Active(time.Unix(0, 0))); got != 3 {
		t.Errorf("%d shapes, want 3", got)
	}
}

// Over enough pods to be read on several goroutines (the race detector,
// which make test runs this package with, sees them), every pod gets the
// shape ShapeOf gives it, kept pods keep theirs and a pod whose claim
// changed gets the new one.
func TestShapesObserveMany(t *testing.T) {
	r, _ := newRunner(t)
	specs := []struct {
		profile string
		count   int64
	}{{"1g", 1}, {"1g", 2}, {"whole", 1}}
	var claims []any
	var pods []*v1.Pod
	for i := range 3 * minParallelPods {
		name := fmt.Sprintf("p%d", i)
		sp := specs[i%len(specs)]
		claims = append(claims, builder.Claim(ns, name).Request(profile("gpu", sp.profile).Count(sp.count)).Obj())
		pods = append(pods, builder.Pod(ns, name).Claim("dev", name).Obj())
	}
	load(t, r, migNode("n1"), claims)
	s := NewShapes(time.Hour)
	check := func(when string) {
		t.Helper()
		for _, p := range pods {
			want, ok := ShapeOf(r.Snapshot(), p, true)
			got := s.byPod[p.UID].shape
			if !ok || got == nil || got.Key != want.Key {
				t.Fatalf("%s: pod %s has shape %v, want %v", when, p.Name, got, want)
			}
		}
		if n := len(s.Active(time.Unix(0, 0))); n != len(specs) {
			t.Fatalf("%s: %d shapes, want %d", when, n, len(specs))
		}
	}
	s.Observe(r.Snapshot(), pods, time.Unix(0, 0))
	check("first")
	kept := s.byPod[pods[0].UID].shape
	// p1's claim is replaced by one with p0's spec.
	if err := r.Snapshot().SetResourceClaim(builder.Claim(ns, "p1").Request(profile("gpu", "1g").Count(1)).Obj()); err != nil {
		t.Fatal(err)
	}
	s.Observe(r.Snapshot(), pods, time.Unix(0, 0))
	check("again")
	if s.byPod[pods[0].UID].shape != kept || s.byPod[pods[1].UID].shape != kept {
		t.Error("an unchanged pod's shape made again, or a changed one's not shared by content")
	}
}

// A pod whose claim reads an attribute every device has its own value
// of (a GPU's uuid), which node keys and the analyzer's node states leave
// out, has no shape: it would fit one node and not another of one state.
func TestShapesLeaveOutPinnedPods(t *testing.T) {
	r, _ := newRunner(t)
	node := func(name string) []any {
		s := builder.ResourceSlice(name+"-gpus", name, gpuDriver, name)
		for i := range 2 {
			s.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr("profile", "whole").Attr("uuid", fmt.Sprintf("GPU-%s-%d", name, i)))
		}
		return []any{builder.Node(name).CPU("64").Memory("256Gi").Obj(), s.Obj()}
	}
	pinned := builder.Claim(ns, "pinned").Request(profile("gpu", "whole").Selector(fmt.Sprintf("device.attributes[%q].uuid == \"GPU-n2-1\"", gpuDriver))).Obj()
	whole := builder.Claim(ns, "whole").Request(profile("gpu", "whole")).Obj()
	load(t, r, node("n1"), node("n2"), []any{pinned, whole})
	pods := []*v1.Pod{builder.Pod(ns, "pinned").Claim("dev", "pinned").Obj(), builder.Pod(ns, "whole").Claim("dev", "whole").Obj()}
	s := NewShapes(time.Hour)
	s.Observe(r.Snapshot(), pods, time.Unix(0, 0))
	if _, ok := s.byPod[pods[0].UID]; ok {
		t.Error("a pod pinned to a GPU by uuid has a shape")
	}
	if s.byPod[pods[1].UID].shape == nil {
		t.Error("a pod asking for any whole GPU has no shape")
	}
}
