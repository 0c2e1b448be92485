package template

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Instances hands out the same node and slice objects again for the same
// template and name. A planner that adds a hypothetical node, reverts it
// and adds it again (each run of a gang's pod group cycle adds the same
// instances under the same names) then finds what the snapshot derived
// from those objects, kept by pointer (the slices' digests and device
// ids, node keys' object digests), instead of deriving it again per run.
// Objects in the snapshot are never modified in place, so one may be
// handed out twice; the pods, which the snapshot binds, are copied each
// time. It keeps every instance it made: one serves one stage of a pass.
// A nil *Instances makes new objects every time. Not safe for concurrent
// use.
type Instances struct {
	made map[instanceKey]instance
}

type instanceKey struct {
	t    *cloudprovider.NodeTemplate
	name string
}

type instance struct {
	node   *v1.Node
	slices []*resourceapi.ResourceSlice
}

// NewInstances is an empty cache.
func NewInstances() *Instances { return &Instances{made: map[instanceKey]instance{}} }

// AddInstance is the package's AddInstance with the node and slices
// taken from c when it made them for t and name before.
func (c *Instances) AddInstance(ctx context.Context, runner *framework.Runner, t *cloudprovider.NodeTemplate, name string) error {
	if c == nil {
		node, slices, pods := Instantiate(t, name)
		return addObjects(ctx, runner, t, name, node, slices, pods)
	}
	k := instanceKey{t, name}
	in, ok := c.made[k]
	if !ok {
		in.node, in.slices = instantiateNode(t, name)
		if in.node != nil {
			c.made[k] = in
		}
	}
	var pods []*v1.Pod
	if in.node != nil {
		pods = instantiatePods(t, name)
	}
	return addObjects(ctx, runner, t, name, in.node, in.slices, pods)
}
