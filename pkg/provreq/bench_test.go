package provreq_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
)

// BenchmarkCheckCapacity is one loop's pass over 20 check-capacity
// requests of 8 one-CPU pods each on 20 four-CPU nodes (half of them fit).
func BenchmarkCheckCapacity(b *testing.B) {
	var reqs []*v1.ProvisioningRequest
	var templates []*corev1.PodTemplate
	for i := range 20 {
		tmpl := fmt.Sprintf("ppt-%d", i)
		reqs = append(reqs, request(fmt.Sprintf("wl-%d-check-1", i), v1.ProvisioningClassCheckCapacity, now, podSet(tmpl, 8)))
		templates = append(templates, podTemplate(tmpl, "1"))
	}
	var objs []any
	for i := range 20 {
		objs = append(objs, cpuNode(fmt.Sprintf("n%d", i), "4"))
	}
	e := newEnv(b, nil, reqs, templates, objs...)
	snap := e.runner.Snapshot()
	b.ResetTimer()
	for b.Loop() {
		snap.Fork()
		e.run()
		if err := snap.Revert(); err != nil {
			b.Fatal(err)
		}
		for len(e.recorder.Events) > 0 {
			<-e.recorder.Events
		}
	}
	if got := e.conditions(b, reqs[19].Name); len(got) != 2 || got[1] != "Provisioned=False/CapacityIsNotFound" {
		b.Fatalf("the last request: %v, want not provisioned", got)
	}
}
