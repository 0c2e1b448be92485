// Package pending is the stage that picks the pods a pass scales for
// (observe.Pending's rules) and splits them into gangs, pods planned
// alone and gangs that must wait; and the pass's usage, which every
// scale-up planned after it takes from, so that limits hold across the
// pass.
package pending

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
)

// Keys the pending stage writes (Usage is written by every stage that
// plans a scale-up after it).
var (
	Gangs   = pass.NewKey[[]*gang.Gang]("gangs")
	Loose   = pass.NewKey[[]*corev1.Pod]("loosePods")
	Waiting = pass.NewKey[[]gang.Waiting]("waitingGangs")
	Usage   = pass.NewKey[limits.Usage]("usage")
	// Extra is an input: pods to plan for although the pass might not
	// pick them (the pod explain is asked about). Added are those of them
	// it did not pick.
	Extra = pass.NewKey[[]*corev1.Pod]("extraPods")
	Added = pass.NewKey[[]*corev1.Pod]("addedPods")
)

// StageName is the pending stage's name.
const StageName = "pending"

// Stage picks the pods to scale for.
type Stage struct {
	// Selection are the rules' knobs; Nodes, VolumeBindings and Unheld
	// are the pass's.
	Rules observe.PendingSelection
	// Exclude, if set, drops pods the pass must not scale for one by one
	// (those a ProvisioningRequest provides for).
	Exclude func([]*corev1.Pod) []*corev1.Pod
	// Count, if set, is told how many pods were picked
	// (unschedulable_pods_count).
	Count func(int)
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string { return StageName }
func (*Stage) Reads() []pass.AnyKey {
	return pass.Keys(observe.Cluster, nodegroups.Groups, load.Built, Extra)
}
func (*Stage) Writes() []pass.AnyKey { return pass.Keys(Gangs, Loose, Waiting, Usage, Added) }
func (*Stage) Acts() bool            { return false }

func (s *Stage) Run(_ context.Context, st *pass.State) error {
	cluster, groups := pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups)
	pods := observe.Pending(cluster.Pods, s.selection(cluster, pass.Get(st, load.Built)), st.Started)
	if s.Exclude != nil {
		pods = s.Exclude(pods)
	}
	if s.Count != nil {
		s.Count(len(pods))
	}
	var added []*corev1.Pod
	for _, x := range pass.Get(st, Extra) {
		if !contains(pods, x) {
			pods = append(pods, x)
			added = append(added, x)
		}
	}
	// The scheduler honours CompositePodGroups only with their gate; the
	// autoscaler's --feature-gates says what the cluster's scheduler has.
	var composites []*schedulingv1alpha3.CompositePodGroup
	if utilfeature.DefaultFeatureGate.Enabled(features.CompositePodGroup) {
		composites = cluster.CompositePodGroups
		if composites == nil {
			composites = []*schedulingv1alpha3.CompositePodGroup{}
		}
	}
	gangs, loose, waiting := gang.Split(pods, cluster.Pods, cluster.PodGroups, composites)
	gangs, waiting = expendable(gangs, waiting, s.Rules.PriorityCutoff)
	pass.Put(st, Gangs, gangs)
	pass.Put(st, Loose, loose)
	pass.Put(st, Waiting, waiting)
	pass.Put(st, Added, added)
	pass.Put(st, Usage, ClusterUsage(cluster.Nodes, groups))
	return nil
}

// Selection is the stage's rules for one pass (explain asks why a pod is
// left alone with it).
func (s *Stage) Selection(st *pass.State) observe.PendingSelection {
	return s.selection(pass.Get(st, observe.Cluster), pass.Get(st, load.Built))
}

func (s *Stage) selection(cluster *observe.ClusterState, built *load.Loaded) observe.PendingSelection {
	sel := s.Rules
	sel.Nodes = observe.Registered(cluster.Nodes)
	sel.VolumeBindings = cluster.VolumeBindings
	if built != nil && len(built.Unheld) > 0 {
		sel.Unheld = map[types.UID]bool{}
		for _, pod := range built.Unheld {
			sel.Unheld[pod.UID] = true
		}
	}
	return sel
}

// ClusterUsage counts the registered nodes and the nodes still coming,
// which limits must include so no scale-up overshoots while others boot.
func ClusterUsage(nodes []*corev1.Node, groups []*nodegroups.Info) limits.Usage {
	var u limits.Usage
	for _, n := range nodes {
		u.Add(n, 1)
	}
	for _, g := range groups {
		if g.Template != nil {
			u.Add(g.Template.Node, g.Upcoming())
		}
	}
	return u
}

// expendable moves the gangs whose priority (their PodGroup's, as the
// scheduler takes it for the whole group) is below the cutoff to the
// waiting: like an expendable pod, such a gang never triggers a scale-up.
func expendable(gangs []*gang.Gang, waiting []gang.Waiting, cutoff int) ([]*gang.Gang, []gang.Waiting) {
	kept := gangs[:0]
	for _, g := range gangs {
		if int(g.Priority) >= cutoff {
			kept = append(kept, g)
			continue
		}
		waiting = append(waiting, gang.Waiting{Namespace: g.Namespace, Name: g.Name, Pods: g.Pending,
			Reason: fmt.Sprintf("gang %s has priority %d, below --expendable-pods-priority-cutoff %d: it never triggers a scale-up", g.Key(), g.Priority, cutoff)})
	}
	return kept, waiting
}

func contains(pods []*corev1.Pod, pod *corev1.Pod) bool {
	for _, p := range pods {
		if p.UID == pod.UID {
			return true
		}
	}
	return false
}
