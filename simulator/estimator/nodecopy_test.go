package estimator

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// A placement copied from one node to another of the same key leaves the
// snapshot as the framework placing the pod there does: same claims
// (names, owners, spec, allocation from the other node's pool, pinned to
// it, reservedFor), same pod with its claim statuses, same allocated
// devices. Each case places a first pod on node-0 through the framework,
// then a second pod of its class on node-1 through the framework or by
// copying the first placement.
func TestCopyPlacementIsExact(t *testing.T) {
	gpuNIC := builder.ClaimTemplate(ns, "gpu-nic").
		Request(builder.Request("gpu", "gpu"), builder.Request("nic", "nic")).MatchAttribute(pcieRoot).Obj()
	twoGPUs := builder.ClaimTemplate(ns, "two-gpus").Request(builder.Request("gpu", "gpu").Count(2)).Obj()
	own, ownObjs := ownClaimPods("own", 2, 1)
	moved, movedObjs := movedPods("moved", 2)
	tests := []struct {
		name string
		objs []any
		pods []*v1.Pod // two of one class
	}{
		{"a claim from a template, two GPUs", []any{twoGPUs}, templatePods("two", "two-gpus", "1", 2)},
		{"GPU and NIC on one PCIe root", []any{gpuNIC}, templatePods("pair", "gpu-nic", "2", 2)},
		{"claims made already", ownObjs, own},
		{"claims made from a template, released (a pod scale-down moves)", append(movedObjs, twoGPUs), moved},
		{"no claim", nil, []*v1.Pod{
			builder.Pod(ns, "cpu-0").CPU("2").OwnedBy("apps/v1", "ReplicaSet", "cpu").Obj(),
			builder.Pod(ns, "cpu-1").CPU("2").OwnedBy("apps/v1", "ReplicaSet", "cpu").Obj(),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dumps [2]string
			for i, copied := range []bool{false, true} {
				r, ctx := bigCluster(t, 3, 3)
				snapshottest.Load(t, r.Snapshot(), tc.objs...)
				e := New(r, Options{})
				keys, err := NewNodeKeys(r.Snapshot(), r.Profile(), tc.pods)
				if err != nil || keys == nil {
					t.Fatalf("no node keys: %v", err)
				}
				if k := keys.Of("node-0"); k == "" || k != keys.Of("node-1") {
					t.Fatal("node-0 and node-1 do not share a key: the case checks nothing")
				}
				if e.ClassKey(tc.pods[0]) != e.ClassKey(tc.pods[1]) || !e.Memoizable(tc.pods[0]) || !keys.Keyable(tc.pods[0]) {
					t.Fatal("the pods are not of one memoizable, keyable class")
				}
				first, err := r.SchedulePod(ctx, tc.pods[0], []string{"node-0"})
				if err != nil || first.Node != "node-0" {
					t.Fatalf("first pod: %v on %q", err, first.Node)
				}
				p, ok := e.CapturePlacement(first.Pod, "node-0")
				if !ok {
					t.Fatal("placement not captured")
				}
				if copied {
					if ok, err := e.CopyPlacement(tc.pods[1], nil, p, "node-1"); err != nil || !ok {
						t.Fatalf("copy: %v, copied %v", err, ok)
					}
				} else if second, err := r.SchedulePod(ctx, tc.pods[1], []string{"node-1"}); err != nil || second.Node != "node-1" {
					t.Fatalf("second pod: %v", err)
				}
				dumps[i] = dump(t, r.Snapshot())
			}
			if dumps[0] != dumps[1] {
				t.Fatalf("copy and framework differ:\n%s", firstDiff(dumps[0], dumps[1]))
			}
		})
	}
}

// What cannot be copied exactly is refused: a placement whose claim is
// shared with another pod, and a copy for a pod whose claim is allocated
// already or that owns claims the framework would look among.
func TestCopyPlacementRefuses(t *testing.T) {
	r, ctx := bigCluster(t, 3, 3)
	twoGPUs := builder.ClaimTemplate(ns, "two-gpus").Request(builder.Request("gpu", "gpu").Count(2)).Obj()
	pods := templatePods("two", "two-gpus", "1", 3)
	orphan := builder.Claim(ns, "two-2-dev-orphan").Request(builder.Request("gpu", "gpu").Count(2)).OwnedByPod(pods[2], "dev").Obj()
	snapshottest.Load(t, r.Snapshot(), twoGPUs, orphan)
	e := New(r, Options{})
	first, err := r.SchedulePod(ctx, pods[0], []string{"node-0"})
	if err != nil || first.Node != "node-0" {
		t.Fatalf("first pod: %v", err)
	}
	p, ok := e.CapturePlacement(first.Pod, "node-0")
	if !ok {
		t.Fatal("placement not captured")
	}
	if _, ok := e.CapturePlacement(first.Pod, "node-1"); ok {
		t.Error("captured as a placement on node-1")
	}
	if ok, err := e.CopyPlacement(pods[2], nil, p, "node-1"); err != nil || ok {
		t.Errorf("copied for a pod that owns a claim already (%v)", err)
	}
	if ok, err := e.CopyPlacement(first.Pod, nil, p, "node-1"); err != nil || ok {
		t.Errorf("copied for a pod whose claim is allocated (%v)", err)
	}
	if ok, _ := e.CopyPlacement(pods[1], nil, &NodePlacement{}, "node-1"); ok {
		t.Error("copied a placement with other claims")
	}
}

// movedPods are n pods as scale-down moves them: each owns the claim its
// template made, named in its status, the allocation dropped (released)
// and the node cleared.
func movedPods(prefix string, n int) ([]*v1.Pod, []any) {
	pods := make([]*v1.Pod, n)
	var objs []any
	for i := range pods {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pods[i] = builder.Pod(ns, name).CPU("1").OwnedBy("apps/v1", "ReplicaSet", prefix).
			ClaimFromTemplate("gpu", "two-gpus").ClaimStatus("gpu", name+"-gpu").Obj()
		objs = append(objs, builder.Claim(ns, name+"-gpu").Request(builder.Request("gpu", "gpu").Count(2)).OwnedByPod(pods[i], "gpu").Obj())
	}
	return pods, objs
}
