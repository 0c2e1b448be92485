package template

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/builder"
)

// An instance added, reverted and added again under the same name is made
// of the same node and slice objects, with pods of its own each time;
// another name or another template gets objects of its own, and a nil
// cache makes new ones every time.
func TestInstancesHandsOutTheSameObjects(t *testing.T) {
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig()))
	runner, err := framework.New(ctx, framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	snap := runner.Snapshot()
	newTemplate := func() *cloudprovider.NodeTemplate {
		node := builder.Node("gpu-node").CPU("64").Obj()
		return &cloudprovider.NodeTemplate{Node: node,
			ResourceSlices: []*resourceapi.ResourceSlice{builder.ResourceSlice("gpu-node-gpus", node.Name, "gpu.example.com", node.Name).
				Devices(builder.Device("gpu-0")).Obj()},
			Pods: []*v1.Pod{builder.Pod("kube-system", "agent").CPU("1").Obj()}}
	}
	a, b := newTemplate(), newTemplate()
	type added struct {
		node  any
		slice any
		pod   any
	}
	// add adds t's instance name in a fork it reverts, and returns its
	// objects as the snapshot holds them.
	add := func(c *Instances, tmpl *cloudprovider.NodeTemplate, name string) added {
		t.Helper()
		snap.Fork()
		defer func() {
			if err := snap.Revert(); err != nil {
				t.Fatal(err)
			}
		}()
		if err := c.AddInstance(ctx, runner, tmpl, name); err != nil {
			t.Fatal(err)
		}
		ni, err := snap.NodeInfos().Get(name)
		if err != nil {
			t.Fatal(err)
		}
		slices := snap.DeviceState(name).Slices
		if len(slices) != 1 || len(ni.GetPods()) != 1 {
			t.Fatalf("instance %s: %d slices, %d pods; want its slice and its agent", name, len(slices), len(ni.GetPods()))
		}
		return added{ni.Node(), slices[0], ni.GetPods()[0].GetPod()}
	}
	c := NewInstances()
	first := add(c, a, "inst-0")
	tests := []struct {
		name       string
		cache      *Instances
		tmpl       *cloudprovider.NodeTemplate
		node       string
		sameObject bool
	}{
		{"same template and name", c, a, "inst-0", true},
		{"another name", c, a, "inst-1", false},
		{"another template", c, b, "inst-0", false},
		{"no cache", nil, a, "inst-0", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := add(tc.cache, tc.tmpl, tc.node)
			if (got.node == first.node) != tc.sameObject || (got.slice == first.slice) != tc.sameObject {
				t.Errorf("same node object %v, same slice object %v; want %v", got.node == first.node, got.slice == first.slice, tc.sameObject)
			}
			if got.pod == first.pod {
				t.Error("the agent pod is the first instance's object; want a copy of its own")
			}
		})
	}
}
