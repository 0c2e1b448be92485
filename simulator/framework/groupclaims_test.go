package framework

import (
	"fmt"
	"testing"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A PodGroup's claim is one claim for all its members: two members on two
// nodes share the one network-attached link a template asks for, in a
// claim the PodGroup owns and reserves. Without DRAWorkloadResourceClaims
// each member gets a claim of its own, and the second finds no link.
func TestPodGroupClaimIsSharedByMembers(t *testing.T) {
	const fabricDriver = "fabric.example.com"
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("DRAWorkloadResourceClaims=%v", on), func(t *testing.T) {
			t.Cleanup(func() {
				if err := ApplyFeatureGates("DRAWorkloadResourceClaims=false,GenericWorkload=false"); err != nil {
					t.Error(err)
				}
			})
			r, ctx := newRunner(t, fmt.Sprintf("GenericWorkload=true,DRAWorkloadResourceClaims=%v", on))
			snapshottest.Load(t, r.Snapshot(), builder.DeviceClass("fabric").Driver(fabricDriver).Obj(),
				builder.Node("n1").CPU("1").Obj(), builder.Node("n2").CPU("1").Obj(),
				builder.ResourceSlice("fabric", "", fabricDriver, "fabric").Devices(builder.Device("link-0")).Obj(),
				builder.ClaimTemplate(ns, "link").Request(builder.Request("link", "fabric")).Obj(),
				builder.PodGroup(ns, "train").MinCount(2).ClaimFromTemplate("link", "link").Obj())
			want := []string{"n1", "n2"}
			if !on {
				want = []string{"n1", ""}
			}
			for i, node := range want {
				pod := builder.Pod(ns, fmt.Sprintf("train-%d", i)).CPU("1").PodGroup("train").ClaimFromTemplate("link", "link").Obj()
				res, err := r.SchedulePod(ctx, pod, []string{"n1", "n2"})
				if err != nil {
					t.Fatal(err)
				}
				if res.Node != node {
					t.Fatalf("%s on %q (%+v), want %q", pod.Name, res.Node, res.Results, node)
				}
			}
			if !on {
				return
			}
			pg := builder.PodGroup(ns, "train").Obj()
			claims := r.Snapshot().ClaimsOwnedBy(pg.UID)
			if len(claims) != 1 {
				t.Fatalf("%d claims owned by the PodGroup, want 1", len(claims))
			}
			c := claims[0]
			if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 || c.Status.ReservedFor[0].Resource != "podgroups" {
				t.Errorf("claim %s: allocation %v, reserved for %+v; want allocated, reserved for the PodGroup once", c.Name, c.Status.Allocation, c.Status.ReservedFor)
			}
			for i := range 2 {
				placed, _ := r.Snapshot().PlacedPod(ns, fmt.Sprintf("train-%d", i))
				if placed == nil || len(placed.Status.ResourceClaimStatuses) != 1 || *placed.Status.ResourceClaimStatuses[0].ResourceClaimName != c.Name {
					t.Errorf("train-%d claim statuses %+v, want the PodGroup's claim %s", i, placed, c.Name)
				}
			}
		})
	}
}
