package plan_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A pod whose claim pairs a GPU and a NIC on one PCIe root, with groups
// whose nodes never have both on one root: each group's reason names
// DynamicResources and the constraint to blame.
func TestPlanReasonsNameTheConstraint(t *testing.T) {
	const nicDriver, pcieRoot = "nic.example.com", "resource.kubernetes.io/pcieRoot"
	e := newEnv(t)
	snap := e.runner.Snapshot()
	for _, c := range []*resourceapi.DeviceClass{builder.DeviceClass("gpu").Driver(gpuDriver).Obj(), builder.DeviceClass("nic").Driver(nicDriver).Obj()} {
		if err := snap.SetDeviceClass(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := snap.SetResourceClaimTemplate(builder.ClaimTemplate("ns", "paired").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj()); err != nil {
		t.Fatal(err)
	}
	var groups []*nodegroups.Info
	for _, id := range []string{"split-a", "split-b"} {
		g := group(id, "8", 10, 0)
		gpus := builder.ResourceSlice("gpus", template.PlaceholderNodeName, gpuDriver, template.PlaceholderNodeName)
		nics := builder.ResourceSlice("nics", template.PlaceholderNodeName, nicDriver, template.PlaceholderNodeName)
		for i := range 2 {
			gpus.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i)))
			nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i+2)))
		}
		g.Template.ResourceSlices = []*resourceapi.ResourceSlice{gpus.Obj(), nics.Obj()}
		groups = append(groups, g)
	}
	var pods []*corev1.Pod
	for i := range 3 {
		pods = append(pods, builder.Pod("ns", fmt.Sprintf("infer-%d", i)).CPU("1").ClaimFromTemplate("accel", "paired").Obj())
	}
	p := e.plan(t, pods, groups, limits.Usage{})
	if len(p.ScaleUps) != 0 || len(p.NotHelped) != 3 {
		t.Fatalf("scale-ups %v, %d not helped; want none and 3", scaleUps(p), len(p.NotHelped))
	}
	for _, pod := range pods {
		rs := p.Reasons[pod.UID]
		if len(rs) != 2 {
			t.Fatalf("%s: %d reasons, want one per group: %v", pod.Name, len(rs), rs)
		}
		for _, r := range rs {
			if r.Reason != names.DynamicResources || r.Constraint != "matchAttribute "+pcieRoot+" of claim accel: the node has no gpu+nic set with one "+pcieRoot {
				t.Errorf("%s: reason %+v, want DynamicResources blaming the pcieRoot constraint", pod.Name, r)
			}
			if !strings.Contains(r.String(), "fits without matchAttribute "+pcieRoot) {
				t.Errorf("%s: message %q does not name the constraint", pod.Name, r.String())
			}
		}
	}
}
