package framework

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// splitRootsNode has GPUs and NICs, but never a GPU and a NIC on one PCIe
// root: a claim pairing them by pcieRoot cannot be met there.
func splitRootsNode(name string) []any {
	gpus := builder.ResourceSlice(name+"-gpus", name, gpuDriver, name)
	nics := builder.ResourceSlice(name+"-nics", name, nicDriver, name)
	for i := range 2 {
		gpus.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i)))
		nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, fmt.Sprintf("pci%d", i+2)))
	}
	return []any{builder.Node(name).Obj(), gpus.Obj(), nics.Obj()}
}

// unevenRootsNode has 4 GPUs and 4 NICs, 3 of each on PCIe root pci0 and
// one of each on pci1: at most 3 GPU+NIC sets share a root.
func unevenRootsNode(name string) []any {
	gpus := builder.ResourceSlice(name+"-gpus", name, gpuDriver, name)
	nics := builder.ResourceSlice(name+"-nics", name, nicDriver, name)
	for i := range 4 {
		root := "pci0"
		if i == 3 {
			root = "pci1"
		}
		gpus.Devices(builder.Device(fmt.Sprintf("gpu-%d", i)).Attr(pcieRoot, root))
		nics.Devices(builder.Device(fmt.Sprintf("nic-%d", i)).Attr(pcieRoot, root))
	}
	return []any{builder.Node(name).Obj(), gpus.Obj(), nics.Obj()}
}

// partitionedNode has one GPU offered whole or as 7 partitions over one
// counter set of 7 slices: 8 devices, of which at most 7 at once.
func partitionedNode(name string) []any {
	counters := builder.ResourceSlice(name+"-gpu-counters", name, gpuDriver, name).Pool(1, 2).
		SharedCounters(builder.CounterSet("gpu-0-counters").Counter("slices", "7"))
	devices := builder.ResourceSlice(name+"-gpu", name, gpuDriver, name).Pool(1, 2).
		Devices(builder.Device("gpu-0").ConsumesCounters("gpu-0-counters", map[string]string{"slices": "7"}))
	for i := range 7 {
		devices.Devices(builder.Device(fmt.Sprintf("gpu-0-mig-%d", i)).ConsumesCounters("gpu-0-counters", map[string]string{"slices": "1"}))
	}
	return []any{builder.Node(name).Obj(), counters.Obj(), devices.Obj()}
}

func TestDiagnoseClaims(t *testing.T) {
	paired := builder.ClaimTemplate(ns, "paired").Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).Obj()
	// Two constraints: only the pcieRoot one is to blame.
	twoConstraints := builder.ClaimTemplate(ns, "two").Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot).DistinctAttribute(pcieRoot, "gpu").Obj()
	tooMany := builder.ClaimTemplate(ns, "many").Request(builder.Request("gpu", "gpu").Count(3)).
		MatchAttribute(pcieRoot).Obj()
	loose := builder.ClaimTemplate(ns, "loose").Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).Obj()
	fourPairs := builder.ClaimTemplate(ns, "four").Request(builder.Request("gpu", "gpu").Count(4), builder.Request("nic", "nic").Count(4)).
		MatchAttribute(pcieRoot).Obj()
	fourGPUs := builder.ClaimTemplate(ns, "four-gpus").Request(builder.Request("gpu", "gpu").Count(4), builder.Request("nic", "nic")).
		MatchAttribute(pcieRoot, "gpu").Obj()
	noPair := "the node has no gpu+nic set with one " + pcieRoot
	eight := builder.ClaimTemplate(ns, "eight").Request(builder.Request("gpu", "gpu").Count(8)).Obj()
	tests := []struct {
		name string
		node func(string) []any
		pod  string // template
		want []Blame
	}{
		{"matchAttribute to blame", splitRootsNode, "paired", []Blame{{PodClaim: "dev", Constraint: "matchAttribute " + pcieRoot, AtMost: noPair}}},
		{"only the guilty of two", splitRootsNode, "two", []Blame{{PodClaim: "dev", Constraint: "matchAttribute " + pcieRoot, AtMost: noPair}}},
		{"how many sets fit under the constraint", unevenRootsNode, "four", []Blame{{PodClaim: "dev", Constraint: "matchAttribute " + pcieRoot,
			AtMost: "the node offers at most 3 of the 4 gpu+nic sets with one " + pcieRoot}}},
		{"a constraint over one request", unevenRootsNode, "four-gpus", []Blame{{PodClaim: "dev", Constraint: "matchAttribute " + pcieRoot + " (requests gpu)",
			AtMost: "the node offers at most 3 of the 4 devices of request gpu with one " + pcieRoot}}},
		{"no constraint helps: too few devices, and how many the node has", splitRootsNode, "many",
			[]Blame{{PodClaim: "dev", Shortage: "request gpu asks 3 device(s) of class gpu; the node offers 2"}}},
		{"fits: nothing to blame", splitRootsNode, "loose", nil},
		{"devices enough, counters used up", partitionedNode, "eight", []Blame{{PodClaim: "dev", Shortage: "request gpu asks 8 device(s) of class gpu; " +
			"the node offers 7 (it has enough such devices, but they draw on the shared counters of gpu-0-counters, which are used up)"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ctx := newRunner(t, "")
			objs := append(append(classes(), tc.node("n1")...), paired, twoConstraints, tooMany, loose, fourPairs, fourGPUs, eight)
			snapshottest.Load(t, r.Snapshot(), objs...)
			pod := builder.Pod(ns, "p").CPU("100m").ClaimFromTemplate("dev", tc.pod).Obj()
			before := len(mustList(t, r))
			got, err := r.DiagnoseClaims(ctx, pod, "n1")
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i].Claim = "" // simulated name
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("blames (-want +got):\n%s", diff)
			}
			if after := len(mustList(t, r)); after != before {
				t.Errorf("snapshot changed: %d claims before, %d after", before, after)
			}
		})
	}
}

func mustList(t *testing.T, r *Runner) []any {
	t.Helper()
	claims, err := r.Snapshot().ResourceClaims().List()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]any, len(claims))
	for i, c := range claims {
		out[i] = c
	}
	return out
}

func TestDescribeConstraint(t *testing.T) {
	for _, tc := range []struct {
		requests []string
		total    int
		want     string
	}{
		{nil, 2, "matchAttribute " + pcieRoot},
		{[]string{"gpu", "nic"}, 2, "matchAttribute " + pcieRoot},
		{[]string{"gpu", "nic"}, 3, "matchAttribute " + pcieRoot + " (requests gpu, nic)"},
	} {
		c := builder.Claim(ns, "c").MatchAttribute(pcieRoot, tc.requests...).Obj().Spec.Devices.Constraints[0]
		if got := DescribeConstraint(&c, tc.total); got != tc.want {
			t.Errorf("DescribeConstraint(%v of %d) = %q, want %q", tc.requests, tc.total, got, tc.want)
		}
	}
}
