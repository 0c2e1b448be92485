package plan_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A gang's members share their PodGroup's claim (one network-attached
// link for the cluster) and each take a GPU: the plan is two one-GPU
// nodes. Planned as if each member had a link claim of its own, the
// second member would find no link and the gang would get nothing.
func TestGangPlannedWithAPodGroupClaim(t *testing.T) {
	for _, links := range []int64{1, 2} {
		t.Run(fmt.Sprintf("links=%d", links), func(t *testing.T) { gangWithAPodGroupClaim(t, links) })
	}
}

// gangWithAPodGroupClaim plans the gang whose PodGroup claim asks links
// links of the one there is: with two, nothing is planned and the reason
// names the PodGroup's claim.
func gangWithAPodGroupClaim(t *testing.T, links int64) {
	if err := framework.ApplyFeatureGates("GenericWorkload=true,DRAWorkloadResourceClaims=true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := framework.ApplyFeatureGates("GenericWorkload=false,DRAWorkloadResourceClaims=false"); err != nil {
			t.Error(err)
		}
	})
	e := newEnv(t)
	snapshottest.Load(t, e.runner.Snapshot(),
		builder.DeviceClass("fabric").Driver("fabric.example.com").Obj(), builder.DeviceClass("gpu").Driver("gpu.example.com").Obj(),
		builder.ResourceSlice("fabric", "", "fabric.example.com", "fabric").Devices(builder.Device("link-0")).Obj(),
		builder.ClaimTemplate("ns", "link").Request(builder.Request("link", "fabric").Count(links)).Obj(),
		builder.ClaimTemplate("ns", "gpu").Request(builder.Request("gpu", "gpu")).Obj(),
		builder.PodGroup("ns", "train").MinCount(2).ClaimFromTemplate("link", "link").Obj())
	g := group("gpu1", "8", 4, 0)
	g.Template = &cloudprovider.NodeTemplate{Node: g.Template.Node, ResourceSlices: []*resourceapi.ResourceSlice{
		builder.ResourceSlice("t-gpu", template.PlaceholderNodeName, "gpu.example.com", template.PlaceholderNodeName).Devices(builder.Device("gpu-0")).Obj()}}
	var members []*corev1.Pod
	for i := range 2 {
		members = append(members, builder.Pod("ns", fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").
			ClaimFromTemplate("link", "link").ClaimFromTemplate("gpu", "gpu").Obj())
	}
	gg := &gang.Gang{Namespace: "ns", Name: "train", MinCount: 2, Pending: members}
	p := plan.New(e.opts, estimator.New(e.runner, estimator.Options{}), e.chain, limits.New(e.conf, nil), e.backoff, nil)
	out, _, err := p.PlanGangs(e.ctx, e.runner, []*gang.Gang{gg}, nil, []*nodegroups.Info{g}, limits.Usage{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if links == 2 {
		why := fmt.Sprint(out[0].Reasons)
		if len(out[0].ScaleUps) != 0 || !strings.Contains(why, "the claim of PodGroup train") {
			t.Errorf("plan %v, reasons %s; want nothing planned and the PodGroup's claim named", nodesOf(out[0].ScaleUps), why)
		}
		return
	}
	if got := nodesOf(out[0].ScaleUps); len(got) != 1 || got[0] != "gpu1: [train-0] [train-1]" {
		t.Errorf("plan %v (%s %v), want two gpu1 nodes, one member each", got, out[0].Message, out[0].Reasons)
	}
}
