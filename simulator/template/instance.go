package template

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// AddInstance adds an instance of t named name (Instantiate) to the
// runner's snapshot: the node, its slices and its own pods. A pod of the
// template that claims devices from claim templates (a DaemonSet agent
// holding a GPU) is scheduled onto the instance by the framework, so its
// claim is allocated from the instance's own devices as the scheduler
// would allocate it on the real node; those devices are then taken for
// every other pod. The other pods are placed as they are. A claiming pod
// that does not fit the instance (its devices are not there) is left off
// it, as the DaemonSet controller's pod would stay pending.
func AddInstance(ctx context.Context, runner *framework.Runner, t *cloudprovider.NodeTemplate, name string) error {
	var none *Instances
	return none.AddInstance(ctx, runner, t, name)
}

// addObjects adds instance name of t, made of node, slices and pods.
func addObjects(ctx context.Context, runner *framework.Runner, t *cloudprovider.NodeTemplate, name string, node *v1.Node, slices []*resourceapi.ResourceSlice, pods []*v1.Pod) error {
	if node == nil {
		return fmt.Errorf("instance %s: template without a node", name)
	}
	snap := runner.Snapshot()
	if err := snap.AddNode(node); err != nil {
		return err
	}
	runner.SetTemplateCSINode(name, t.CSINode)
	for _, s := range slices {
		if err := snap.SetResourceSlice(s); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	for _, p := range pods {
		if !claimsFromTemplates(p) {
			if err := snap.AddPod(p, name); err != nil {
				return fmt.Errorf("node %s: %w", name, err)
			}
			continue
		}
		// The instance's own claim, made as the resourceclaim controller
		// makes one for a new pod: not the template node's.
		cp := *p
		cp.Spec.NodeName = ""
		cp.Status.ResourceClaimStatuses = nil
		res, err := runner.SchedulePod(ctx, &cp, []string{name})
		if err != nil {
			return fmt.Errorf("node %s: pod %s: %w", name, p.Name, err)
		}
		if res.Node == "" {
			klog.FromContext(ctx).V(4).Info("Template pod with a claim does not fit its instance", "node", name, "pod", klog.KObj(p))
		}
	}
	return nil
}

// claimsFromTemplates: the pod claims devices, each through a claim
// template (a shared, named claim is one object, placed where it is).
func claimsFromTemplates(p *v1.Pod) bool {
	if len(p.Spec.ResourceClaims) == 0 {
		return false
	}
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName == nil {
			return false
		}
	}
	return true
}
