package snapshot

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestScopeSlicesListsScopedNodesAndUnboundSlices(t *testing.T) {
	s := newTestSnapshot(t)
	for _, sl := range []struct{ name, node string }{
		{"a1", "n1"}, {"net", ""}, {"b", "n2"}, {"c", "n3"}, {"a2", "n1"},
	} {
		mustOK(t, s.SetResourceSlice(builder.ResourceSlice(sl.name, sl.node, "d", sl.name).Obj()))
	}
	names := func() []string {
		list, _ := s.ResourceSlices().ListWithDeviceTaintRules()
		var out []string
		for _, sl := range list {
			out = append(out, sl.Name)
		}
		return out
	}
	// want is the full list without the slices of n2, in its order.
	want := func() []string {
		scope := s.sliceScope
		s.ScopeSlices(nil)
		defer func() { s.sliceScope = scope }()
		return slices.DeleteFunc(names(), func(n string) bool { return n == "b" })
	}
	s.ScopeSlices([]string{"n3", "n1", "n3"})
	if got, want := names(), []string{"a1", "net", "c", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("scoped to n1 and n3: %v, want %v", got, want)
	}
	s.Fork()
	mustOK(t, s.SetResourceSlice(builder.ResourceSlice("a3", "n1", "d", "a3").Obj()))
	mustOK(t, s.RemoveResourceSlice("net"))
	if got, want := names(), want(); !slices.Equal(got, want) || len(got) != 4 {
		t.Fatalf("after changes in a fork: %v, want %v", got, want)
	}
	mustOK(t, s.Revert())
	if got, want := names(), []string{"a1", "net", "c", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("after revert: %v, want %v", got, want)
	}
	s.ScopeSlices(nil)
	if got, want := names(), []string{"a1", "net", "b", "c", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("scope lifted: %v, want %v", got, want)
	}
}

func TestScopedSlicesKeepTaintRules(t *testing.T) {
	s := newTestSnapshot(t)
	if !s.gates.deviceTaintRules {
		// GA and on by default in 1.37: off here means the gates were
		// not read, which is a bug, not a reason to skip.
		t.Fatal("DRADeviceTaintRules is off in the snapshot")
	}
	mustOK(t, s.SetResourceSlice(builder.ResourceSlice("a", "n1", "d", "p").Devices(builder.Device("gpu-0")).Obj()))
	driver := "d"
	mustOK(t, s.SetDeviceTaintRule(&resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: &driver},
			Taint:          resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		},
	}))
	s.ScopeSlices([]string{"n1"})
	list, _ := s.ResourceSlices().ListWithDeviceTaintRules()
	if len(list) != 1 || len(list[0].Spec.Devices[0].Taints) != 1 {
		t.Fatalf("scoped list %+v, want the slice with the rule's taint", list)
	}
}
