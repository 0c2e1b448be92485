package nodegroups

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// Templates builds templates with the simulator: sanitised copies of real
// nodes, and provider templates completed with the DaemonSet pods the real
// scheduler framework would place on them.
type Templates struct {
	Runner *framework.Runner
}

var _ TemplateBuilder = Templates{}

// FromNode keeps the node's start-up pods; its DaemonSets already run there.
func (t Templates) FromNode(_ context.Context, node *corev1.Node, slices []*resourceapi.ResourceSlice, pods []*corev1.Pod) (*cloudprovider.NodeTemplate, error) {
	return template.FromNode(node, slices, pods)
}

// FromProvider adds the pods of the cluster's DaemonSets that would run on
// such a node.
func (t Templates) FromProvider(ctx context.Context, tmpl *cloudprovider.NodeTemplate, daemonSets []*appsv1.DaemonSet) (*cloudprovider.NodeTemplate, error) {
	if tmpl == nil || tmpl.Node == nil {
		return nil, fmt.Errorf("provider template has no node")
	}
	out := tmpl.DeepCopy()
	if len(daemonSets) == 0 {
		return out, nil
	}
	pods, err := template.DaemonSetPods(ctx, t.Runner, out, daemonSets)
	if err != nil {
		return nil, fmt.Errorf("DaemonSet pods: %w", err)
	}
	out.Pods = append(out.Pods, pods...)
	return out, nil
}
