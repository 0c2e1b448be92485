package clusterapi

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// The DRA template ConfigMap is what the real scheduler framework places
// claims on (a test-only import of the simulator): GPU+NIC pairs with
// matchAttribute pcieRoot fit twice per node (gpu-0/nic-0, gpu-1/nic-1); a
// third pair needs a second node, because gpu-0-half shares gpu-0's
// counters and gpu-0 is taken.
func TestDRATemplateSchedules(t *testing.T) {
	const root = "resource.kubernetes.io/pcieRoot"
	e := newEnv(t, nil, md("gpu").size(0, 3).ann(keyCPU, "32", keyMemory, "256Gi", AnnotationDRATemplate, "gpu-dra"),
		configMap("gpu-dra", map[string]string{DRATemplateKey: gpuNIC}))
	tmpl, err := e.group(gpuGroup).TemplateNodeInfo()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	r, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := r.Snapshot()
	for _, err := range []error{
		snap.SetDeviceClass(builder.DeviceClass("gpu").Driver("gpu.example.com").Obj()),
		snap.SetDeviceClass(builder.DeviceClass("nic").Driver("nic.example.com").Obj()),
		snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "paired").
			Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(root).Obj()),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	est := estimator.New(r, estimator.Options{MaxNodes: 5})
	for _, tc := range []struct{ pods, nodes int }{{1, 1}, {2, 1}, {3, 2}} {
		var pods []*corev1.Pod
		for i := range tc.pods {
			pods = append(pods, builder.Pod("ns", fmt.Sprintf("p-%d", i)).CPU("1").ClaimFromTemplate("accel", "paired").Obj())
		}
		res, err := est.Estimate(ctx, pods, tmpl, gpuGroup)
		if err != nil {
			t.Fatal(err)
		}
		if res.NodeCount != tc.nodes || res.Unplaced.Len() != 0 {
			t.Errorf("%d pods: %d nodes, unplaced %+v; want %d nodes", tc.pods, res.NodeCount, res.Unplaced, tc.nodes)
		}
	}
}
