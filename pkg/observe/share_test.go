package observe

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// same reports whether two maps are one.
func same(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Objects that hold equal maps hold one after the transform, with the
// content they had; unequal ones keep their own; empty ones become nil;
// and the maps kept are never written.
func TestSharerShares(t *testing.T) {
	pod := func(name, cpu string) *corev1.Pod {
		return builder.Pod("ns", name).CPU(cpu).Memory("8Gi").Label("app", "train").NodeSelector("pool", "a").Obj()
	}
	counters := func(n string) map[string]resourceapi.Counter {
		return map[string]resourceapi.Counter{"memory": {Value: resource.MustParse(n)}, "sm": {Value: resource.MustParse("66")}}
	}
	slice := func(node, memory string) *resourceapi.ResourceSlice {
		s := builder.ResourceSlice(node, node, "gpu.example.com", node).Obj()
		s.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "gpu-0", Counters: counters("80Gi")}}
		for _, d := range []string{"half-0", "half-1"} {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d,
				Attributes:       map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"uuid": {StringValue: ptr.To(node + d)}},
				Capacity:         map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(memory)}},
				ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0", Counters: counters("40Gi")}},
			})
		}
		return s
	}
	var s sharer
	transform := func(obj any) any {
		t.Helper()
		wasCopy := reflect.ValueOf(obj).MethodByName("DeepCopy").Call(nil)[0].Interface()
		out, err := s.transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(out, wasCopy, cmp.Transformer("empty", func(m map[string]string) map[string]string {
			if len(m) == 0 {
				return nil
			}
			return m
		}), cmp.Transformer("emptyList", func(l corev1.ResourceList) corev1.ResourceList {
			if len(l) == 0 {
				return nil
			}
			return l
		})) {
			t.Errorf("the transform changed content: %s", cmp.Diff(wasCopy, out))
		}
		return out
	}

	a := transform(pod("a", "1")).(*corev1.Pod)
	kept := a.DeepCopy()
	b, c := transform(pod("b", "1")).(*corev1.Pod), transform(pod("c", "2")).(*corev1.Pod)
	if !cmp.Equal(a, kept) {
		t.Errorf("transforming other pods wrote the first one's: %s", cmp.Diff(kept, a))
	}
	if ra, rb := a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests; !same(ra, rb) {
		t.Error("two pods' equal requests are two maps")
	}
	if same(a.Spec.Containers[0].Resources.Requests, c.Spec.Containers[0].Resources.Requests) {
		t.Error("unequal requests share a map")
	}
	if !same(a.Labels, c.Labels) || !same(a.Spec.NodeSelector, c.Spec.NodeSelector) {
		t.Error("equal labels or node selectors are two maps")
	}
	if a.Spec.Containers[0].Resources.Limits != nil {
		t.Errorf("empty limits are %#v, want nil", a.Spec.Containers[0].Resources.Limits)
	}

	n1 := transform(builder.Node("n1").CPU("64").Obj()).(*corev1.Node)
	n2 := transform(builder.Node("n2").CPU("64").Obj()).(*corev1.Node)
	if !same(n1.Status.Capacity, n2.Status.Capacity) || !same(n1.Status.Allocatable, n2.Status.Allocatable) {
		t.Error("two nodes' equal capacities are two maps")
	}

	s1, s2, s3 := transform(slice("n1", "40Gi")).(*resourceapi.ResourceSlice), transform(slice("n2", "40Gi")).(*resourceapi.ResourceSlice), transform(slice("n3", "20Gi")).(*resourceapi.ResourceSlice)
	d1, d2, d3 := s1.Spec.Devices, s2.Spec.Devices, s3.Spec.Devices
	if !same(d1[0].Capacity, d2[1].Capacity) || same(d1[0].Capacity, d3[0].Capacity) {
		t.Error("device capacities shared wrongly: equal ones must be one map, unequal ones not")
	}
	if !same(d1[0].ConsumesCounters[0].Counters, d3[1].ConsumesCounters[0].Counters) {
		t.Error("equal counter consumptions are two maps")
	}
	if !same(s1.Spec.SharedCounters[0].Counters, s3.Spec.SharedCounters[0].Counters) || same(s1.Spec.SharedCounters[0].Counters, d1[0].ConsumesCounters[0].Counters) {
		t.Error("counter sets shared wrongly")
	}
	if same(d1[0].Attributes, d2[0].Attributes) {
		t.Error("unequal attributes share a map")
	}

	// Not shared: capacities with request policies, maps too large to key.
	policy := slice("n4", "40Gi")
	policy.Spec.Devices[0].Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse("40Gi"),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(resource.MustParse("1Gi"))}}
	p := transform(policy).(*resourceapi.ResourceSlice)
	if same(p.Spec.Devices[0].Capacity, d1[0].Capacity) || !same(p.Spec.Devices[1].Capacity, d1[0].Capacity) {
		t.Error("a capacity with a request policy was shared, or the device beside it was not")
	}
	big := map[string]string{"k": strings.Repeat("v", maxKey)}
	l1 := transform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l1", Labels: big}}).(*corev1.Pod)
	l2 := transform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l2", Labels: map[string]string{"k": strings.Repeat("v", maxKey)}}}).(*corev1.Pod)
	if same(l1.Labels, l2.Labels) || len(s.labels.m) > 2 {
		t.Errorf("labels over maxKey shared (%d kept)", len(s.labels.m))
	}

	// Managed fields still go.
	mf := pod("mf", "1")
	mf.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	if out, _ := s.transform(mf); out.(*corev1.Pod).ManagedFields != nil {
		t.Error("managed fields kept")
	}
}

// A table past maxShared starts again: what objects point at stays.
func TestSharerBounded(t *testing.T) {
	var s sharer
	first := map[string]string{"i": "0"}
	if got := s.strings(first); !same(got, first) {
		t.Fatal("the first map is not kept")
	}
	for i := 1; i <= maxShared; i++ {
		s.strings(map[string]string{"i": strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)})
	}
	if len(s.labels.m) > maxShared {
		t.Errorf("%d maps kept, want at most %d", len(s.labels.m), maxShared)
	}
	if again := s.strings(map[string]string{"i": "0"}); same(again, first) {
		t.Error("a map dropped with its table is still handed out")
	}
}
