package leastwaste

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

func TestRequestCacheKeepsOnlyTheLastCall(t *testing.T) {
	c := &requestCache{}
	a, b := builder.Pod("ns", "a").CPU("1").Obj(), builder.Pod("ns", "b").CPU("2").Obj()
	if r := c.get(a); r.cpu != 1000 {
		t.Fatalf("a asks %d mCPU, want 1000", r.cpu)
	}
	c.turn()
	if _, ok := c.prev[a]; !ok {
		t.Fatal("a's requests are not kept for the next call")
	}
	c.get(b)
	c.turn() // a was not asked about in that call: it is dropped
	if _, ok := c.prev[a]; ok || len(c.prev) != 1 {
		t.Fatalf("kept %d pods, want only b", len(c.prev))
	}
}

// Requests the caller knows are used; a pod it does not know is summed
// from its containers.
func TestRequestCacheAsksKnownFirst(t *testing.T) {
	a, b := builder.Pod("ns", "a").CPU("1").Obj(), builder.Pod("ns", "b").CPU("2").Obj()
	c := &requestCache{known: func(p *corev1.Pod) (int64, int64, bool) { return 3000, 7, p == a }}
	for _, tc := range []struct {
		pod      *corev1.Pod
		cpu, mem int64
	}{{a, 3000, 7}, {b, 2000, 0}} {
		if r := c.get(tc.pod); r.cpu != tc.cpu || r.mem != tc.mem {
			t.Errorf("pod %s: %d mCPU, %d bytes; want %d, %d", tc.pod.Name, r.cpu, r.mem, tc.cpu, tc.mem)
		}
	}
}

func TestBestAgreesWithWaste(t *testing.T) {
	node := builder.Node("t").CPU("4").Memory("16Gi").Obj()
	tmpl := &cloudprovider.NodeTemplate{Node: node}
	pods := func(cpu string, n int) []*corev1.Pod {
		var out []*corev1.Pod
		for range n {
			out = append(out, builder.Pod("ns", "p").CPU(cpu).Obj())
		}
		return out
	}
	full := expander.Option{NodeGroup: "full", NodeCount: 1, Pods: pods("1", 4), Template: tmpl}
	half := expander.Option{NodeGroup: "half", NodeCount: 1, Pods: pods("1", 2), Template: tmpl}
	s := New()
	for round := range 3 { // the later rounds read the cache
		got := s.Best([]expander.Option{half, full})
		if len(got) != 1 || got[0].NodeGroup != "full" || Waste(full) >= Waste(half) {
			t.Fatalf("round %d chose %v (waste full %.2f, half %.2f)", round, got, Waste(full), Waste(half))
		}
	}
}
