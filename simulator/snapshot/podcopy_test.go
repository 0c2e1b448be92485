package snapshot

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A pod added as a copy must leave the node exactly as AddPod of the same
// pod does, while the stored pod is the copy, not the PodInfo's pod.
func TestAddPodCopyMatchesAddPod(t *testing.T) {
	pending := builder.Pod("ns", "p").CPU("3").Memory("2Gi").Request("example.com/gpu", "2").
		ClaimFromTemplate("gpu", "one-gpu").Obj()
	info, err := framework.NewPodInfo(pending)
	mustOK(t, err)
	placed := *pending
	placed.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-abcde")}}

	withCopy, plain := newTestSnapshot(t), newTestSnapshot(t)
	for _, s := range []*Snapshot{withCopy, plain} {
		mustOK(t, s.AddNode(builder.Node("n1").CPU("8").Obj()))
		s.Fork()
	}
	mustOK(t, withCopy.AddPodCopy(&placed, "n1", info))
	mustOK(t, plain.AddPod(&placed, "n1"))
	got, _ := withCopy.Get("n1")
	want, _ := plain.Get("n1")
	if g, w := got.(*framework.NodeInfo), want.(*framework.NodeInfo); !reflect.DeepEqual(g.Requested, w.Requested) ||
		!reflect.DeepEqual(g.NonZeroRequested, w.NonZeroRequested) || g.Requested.MilliCPU != 3000 || len(g.Pods) != 1 {
		t.Fatalf("requested %+v / %+v, want %+v / %+v", g.Requested, g.NonZeroRequested, w.Requested, w.NonZeroRequested)
	}
	stored := got.GetPods()[0].GetPod()
	if stored.Spec.NodeName != "n1" || len(stored.Status.ResourceClaimStatuses) != 1 || pending.Spec.NodeName != "" {
		t.Fatalf("stored pod %+v is not the placed copy on n1", stored)
	}
	mustOK(t, withCopy.RemovePod("ns", "p"))
	if got, _ := withCopy.Get("n1"); got.(*framework.NodeInfo).Requested.MilliCPU != 0 {
		t.Fatal("removing the copy did not give its resources back")
	}
	mustOK(t, withCopy.Revert())

	other := builder.Pod("ns", "q").UID("other").Obj()
	if err := withCopy.AddPodCopy(other, "n1", info); err == nil {
		t.Fatal("a pod with another UID was added as a copy")
	}
}
