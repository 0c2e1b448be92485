package clusterapi

import (
	"fmt"
	"testing"
)

// BenchmarkRefresh is one loop's Refresh over 100 MachineDeployments of
// 20 Machines each (2,000 Machines), from the informers' caches.
func BenchmarkRefresh(b *testing.B) {
	var objs []*obj
	for i := range 100 {
		name := fmt.Sprintf("md-%03d", i)
		objs = append(objs, md(name).size(0, 50).replicas(20))
		for j := range 20 {
			m := fmt.Sprintf("%s-m%02d", name, j)
			objs = append(objs, machine(m).of(name).providerID("test:///"+m).node(m))
		}
	}
	e := benchEnv(b, objs)
	b.ResetTimer()
	for b.Loop() {
		if err := e.p.Refresh(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	if n := len(e.p.NodeGroups()); n != 100 {
		b.Fatalf("%d groups", n)
	}
}

// BenchmarkTemplateNodeInfo is one group's template per pass, from
// annotations and the GPU+NIC DRA template ConfigMap.
func BenchmarkTemplateNodeInfo(b *testing.B) {
	e := benchEnv(b, []*obj{md("gpu").size(0, 3).ann(keyCPU, "32", keyMemory, "256Gi", AnnotationDRATemplate, "gpu-dra"),
		configMap("gpu-dra", map[string]string{DRATemplateKey: gpuNIC})})
	g := e.p.NodeGroups()[0]
	for b.Loop() {
		if _, err := g.TemplateNodeInfo(); err != nil {
			b.Fatal(err)
		}
	}
}
