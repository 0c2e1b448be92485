package template

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A DaemonSet agent that claims a GPU takes it on every instance: a pod
// claiming all 8 no longer fits, one claiming 7 does, and each instance
// has its own agent claim.
func TestAddInstanceAllocatesTemplatePodsClaims(t *testing.T) {
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4))))
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := runner.Snapshot()
	var devices []*builder.DeviceBuilder
	for i := range 8 {
		devices = append(devices, builder.Device(fmt.Sprintf("gpu-%d", i)))
	}
	node := builder.Node("gpu-node").CPU("64").Obj()
	tmpl := &cloudprovider.NodeTemplate{Node: node,
		ResourceSlices: []*resourceapi.ResourceSlice{builder.ResourceSlice("gpu-node-gpus", node.Name, "gpu.example.com", node.Name).Devices(devices...).Obj()}}
	for _, obj := range []func() error{
		func() error { return snap.SetDeviceClass(builder.DeviceClass("gpu").Driver("gpu.example.com").Obj()) },
		func() error {
			return snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "one").Request(builder.Request("gpu", "gpu")).Obj())
		},
		func() error {
			return snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "seven").Request(builder.Request("gpu", "gpu").Count(7)).Obj())
		},
		func() error {
			return snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "eight").Request(builder.Request("gpu", "gpu").Count(8)).Obj())
		},
	} {
		if err := obj(); err != nil {
			t.Fatal(err)
		}
	}
	agent := builder.DaemonSet("ns", "agent").Toleration("", "", "").Obj()
	agent.Spec.Template.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one")}}
	agent.Spec.Template.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	pods, err := DaemonSetPods(ctx, runner, tmpl, []*appsv1.DaemonSet{agent})
	if err != nil || len(pods) != 1 {
		t.Fatalf("DaemonSetPods = %d pods, %v; want the agent", len(pods), err)
	}
	tmpl.Pods = pods

	for i := range 2 {
		if err := AddInstance(ctx, runner, tmpl, fmt.Sprintf("inst-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		claim string
		fits  bool
	}{{"eight", false}, {"seven", true}}
	for _, tc := range tests {
		pod := builder.Pod("ns", "train-"+tc.claim).ClaimFromTemplate("gpus", tc.claim).UID(types.UID("uid-" + tc.claim)).Obj()
		for _, inst := range []string{"inst-0", "inst-1"} {
			snap.Fork()
			res, err := runner.SchedulePod(ctx, pod, []string{inst})
			if rerr := snap.Revert(); rerr != nil {
				t.Fatal(rerr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Node != ""; got != tc.fits {
				t.Errorf("pod claiming %s on %s: fits %v, want %v", tc.claim, inst, got, tc.fits)
			}
		}
	}
}
