package disagree

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
)

// Found is the key of the pass's disagreements.
var Found = pass.NewKey[[]Disagreement]("disagreements")

// StageName is the disagreement stage's name.
const StageName = "disagreements"

// Stage compares where the simulation placed pending pods with what the
// scheduler did (the status reports them).
func (d *Detector) Stage() pass.Stage {
	return pass.Func{ID: StageName, Acting: true, In: pass.Keys(observe.Cluster, nodegroups.Groups, fitexisting.Fits), Out: pass.Keys(Found),
		Do: func(_ context.Context, st *pass.State) error {
			cluster := pass.Get(st, observe.Cluster)
			registered := registeredNodes(cluster.Nodes, pass.Get(st, nodegroups.Groups))
			pass.Put(st, Found, d.Update(withHeld(pass.Get(st, fitexisting.Fits), cluster.Pods, registered), registered, st.Started))
			return nil
		}}
}

// withHeld adds to the simulation's placements the unschedulable pods
// held on a registered node by a nomination: the snapshot places them
// there (a nominated pod is no longer pending to the pass), so a pod the
// scheduler keeps refusing on the node it was nominated for (ours, from
// the plan) still disagrees.
func withHeld(fits map[*corev1.Pod]string, pods []*corev1.Pod, registered map[string]string) map[*corev1.Pod]string {
	var out map[*corev1.Pod]string
	for _, p := range pods {
		if _, ok := registered[p.Status.NominatedNodeName]; !ok || p.Spec.NodeName != "" || !observe.IsUnschedulable(p) {
			continue
		}
		if out == nil {
			out = make(map[*corev1.Pod]string, len(fits)+1)
			for pod, node := range fits {
				out[pod] = node
			}
		}
		out[p] = p.Status.NominatedNodeName
	}
	if out == nil {
		return fits
	}
	return out
}

// registeredNodes maps the registered nodes the simulation may count on
// to "" when they are usable (a pod placed there should be bound by the
// scheduler) or to why they are not yet (booting, not Ready): a pod that
// waits on such a node past the threshold is told what the node lacks.
func registeredNodes(nodes []*corev1.Node, groups []*nodegroups.Info) map[string]string {
	notUsable := map[string]string{}
	for _, g := range groups {
		for name, why := range g.NotUsable {
			notUsable[name] = why
		}
	}
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.Spec.Unschedulable || n.DeletionTimestamp != nil {
			// The simulation does not count on these either.
			continue
		}
		why, inGroup := notUsable[n.Name]
		if !inGroup && !nodeutil.IsNodeReady(n) {
			why = "node is not Ready"
		}
		out[n.Name] = why
	}
	return out
}
