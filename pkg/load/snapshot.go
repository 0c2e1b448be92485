// Package load is the loop's snapshot stage: it loads what was observed
// into the simulator's cluster snapshot, with the nodes that are requested
// but not ready yet added as their group's template would be, so that pods
// waiting for them are not scaled up for twice.
package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	simsnapshot "github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/template"
)

// Loaded says which nodes the snapshot holds.
type Loaded struct {
	// Nodes are the registered nodes, booting ones included, sorted.
	Nodes []string
	// Upcoming are hypothetical nodes for requests not registered yet.
	Upcoming []string
	// GroupOf maps every upcoming or booting node to its group.
	GroupOf map[string]string
	// Unheld are pending pods held on a node (nominated there, or their
	// volume provisioned for it) whose claims the node's devices cannot
	// take in the snapshot any more: pods held there before them took
	// the devices. They are pending in the snapshot, like any other.
	Unheld []*corev1.Pod
}

// Candidates are all nodes a pending pod may go to without a scale-up.
func (r *Loaded) Candidates() []string {
	return append(append(make([]string, 0, len(r.Nodes)+len(r.Upcoming)), r.Nodes...), r.Upcoming...)
}

// Options say which pods the snapshot holds as the scheduler sees them.
type Options struct {
	// ExpendableCutoff: running pods below this priority are left out,
	// because the scheduler preempts them for any pod above it
	// (--expendable-pods-priority-cutoff); they never block a fit.
	ExpendableCutoff int
	// Runner, when set (it is in the loop: snap is its snapshot), places
	// the template pods that claim devices on each upcoming node through
	// the framework, so their claims take that node's devices.
	Runner *framework.Runner
	// PodInfos, when set, keeps the PodInfos of placed pods for the next
	// pass (the loop's); nil: made afresh, still in parallel.
	PodInfos *PodInfos
}

// Prepare empties snap and loads what templates are judged against before
// the groups are collected: the device classes, device taint rules and
// claim templates, so a DaemonSet pod claiming devices is placed on a
// group's template as the scheduler would place it. Build fills the rest.
func Prepare(ctx context.Context, snap *simsnapshot.Snapshot, state *observe.ClusterState) error {
	if err := snap.Reset(); err != nil {
		return fmt.Errorf("reset snapshot: %w", err)
	}
	loadDefinitions(ctx, snap, state)
	return nil
}

func loadDefinitions(ctx context.Context, snap *simsnapshot.Snapshot, state *observe.ClusterState) {
	logger := klog.FromContext(ctx)
	for _, c := range state.DeviceClasses {
		skip(logger, "deviceclass", "", c.Name, snap.SetDeviceClass(c))
	}
	for _, r := range state.DeviceTaintRules {
		skip(logger, "devicetaintrule", "", r.Name, snap.SetDeviceTaintRule(r))
	}
	for _, t := range state.ResourceClaimTemplates {
		skip(logger, "resourceclaimtemplate", t.Namespace, t.Name, snap.SetResourceClaimTemplate(t))
	}
}

type heldPod struct {
	pod  *corev1.Pod
	node string
}

// placeHeld places pending pods with claims on the nodes they are held on
// through the framework, so that their claims hold the devices they will
// get there: placed as they are, with their claims unallocated, the
// devices would look free to every other pod, and a pod nominated for a
// node could be planned onto devices another held pod has. A pod that
// fits its node alone but not after the held pods before it (in
// namespace/name order, so the same pods win every pass) stays pending in
// the snapshot, and is returned. A pod that does not fit its node even
// alone waits for what the snapshot cannot show (preemption's victims
// terminating, say): it holds its place as before, its claims
// unallocated.
func placeHeld(ctx context.Context, opts Options, holding []heldPod) (unheld []*corev1.Pod) {
	logger := klog.FromContext(ctx)
	slices.SortFunc(holding, func(a, b heldPod) int {
		return cmp.Or(strings.Compare(a.pod.Namespace, b.pod.Namespace), strings.Compare(a.pod.Name, b.pod.Name))
	})
	snap := opts.Runner.Snapshot()
	var waiting, try []heldPod
	for _, h := range holding {
		if err := snap.AddPendingPod(h.pod); err != nil {
			logger.V(4).Info("Left out of the snapshot", "object", "pod/"+h.pod.Namespace+"/"+h.pod.Name, "err", err)
			continue
		}
		if v, err := opts.Runner.RunFilters(ctx, h.pod, []string{h.node}); err != nil || len(v) != 1 || !v[0].Fits {
			waiting = append(waiting, h)
			continue
		}
		try = append(try, h)
	}
	for _, h := range try {
		var r *framework.ScheduleResult
		var err error
		if info := opts.PodInfos.Of(h.pod); info != nil {
			r, err = opts.Runner.SchedulePodInfo(ctx, info, []string{h.node})
		} else {
			r, err = opts.Runner.SchedulePod(ctx, h.pod, []string{h.node})
		}
		switch {
		case err != nil:
			logger.Error(err, "Placing a pod held on a node failed; it holds its place without its claims", "pod", klog.KObj(h.pod), "node", h.node)
			waiting = append(waiting, h)
		case r.Node == "":
			why := ""
			if len(r.Results) > 0 {
				why = r.Results[0].Message
			}
			logger.V(2).Info("A pod held on a node no longer fits there after the pods held before it; it is pending", "pod", klog.KObj(h.pod), "node", h.node, "why", why)
			unheld = append(unheld, h.pod)
		}
	}
	for _, h := range waiting {
		err := snap.RemovePendingPod(h.pod.Namespace, h.pod.Name)
		if info := opts.PodInfos.Of(h.pod); err == nil && info != nil {
			err = snap.AddPodCopy(h.pod, h.node, info)
		} else if err == nil {
			err = snap.AddPod(h.pod, h.node)
		}
		if err != nil {
			logger.V(4).Info("Left out of the snapshot", "object", "pod/"+h.pod.Namespace+"/"+h.pod.Name, "err", err)
		}
	}
	return unheld
}

// Build empties snap and fills it from the observed state and the groups.
// Objects that cannot be loaded (say, a pod on a node that is gone) are
// logged and left out; they never stop the loop. A pending pod nominated
// for a node (preemption under way) is placed there.
func Build(ctx context.Context, snap *simsnapshot.Snapshot, state *observe.ClusterState, groups []*nodegroups.Info, opts Options) (*Loaded, error) {
	logger := klog.FromContext(ctx)
	if err := snap.Reset(); err != nil {
		return nil, fmt.Errorf("reset snapshot: %w", err)
	}
	snap.Reserve(len(state.Nodes), len(state.Pods), len(state.ResourceSlices))
	loadDefinitions(ctx, snap, state)
	skip(logger, "resourceclaims", "", "", snap.LoadResourceClaims(state.ResourceClaims))
	for _, w := range state.Workloads {
		skip(logger, "workload", w.Namespace, w.Name, snap.SetWorkload(w))
	}
	for _, c := range state.CompositePodGroups {
		skip(logger, "compositepodgroup", c.Namespace, c.Name, snap.SetCompositePodGroup(c))
	}
	for _, g := range state.PodGroups {
		skip(logger, "podgroup", g.Namespace, g.Name, snap.SetPodGroup(g))
	}

	res := &Loaded{GroupOf: map[string]string{}}
	booting := map[string]*nodegroups.Info{}
	for _, g := range groups {
		for _, n := range g.Booting {
			if !g.Stale[n.Name] {
				booting[n.Name] = g
			}
		}
	}
	for _, node := range state.Nodes {
		if g := booting[node.Name]; g != nil && g.Template != nil {
			// Not ready yet: simulate it as its template, under its name.
			if err := addTemplateNode(snap, g.Template, node.Name, node); err != nil {
				skip(logger, "node", "", node.Name, err)
				continue
			}
			if opts.Runner != nil {
				// Until its kubelet registers one, its template's CSINode.
				opts.Runner.SetTemplateCSINode(node.Name, g.Template.CSINode)
			}
			res.GroupOf[node.Name] = g.Id
		} else if err := snap.AddNode(node); err != nil {
			skip(logger, "node", "", node.Name, err)
			continue
		}
		res.Nodes = append(res.Nodes, node.Name)
	}
	sort.Strings(res.Nodes)
	// In name order: the lister's is a map's, and the snapshot lists a
	// node's slices in the order they were added, so what is kept of a
	// node across passes (simsnapshot.DeviceState) is found again only if
	// every build adds them alike.
	sorted := slices.SortedFunc(slices.Values(state.ResourceSlices), func(a, b *resourceapi.ResourceSlice) int {
		return strings.Compare(a.Name, b.Name)
	})
	for _, s := range sorted {
		if s.Spec.NodeName != nil && booting[*s.Spec.NodeName] != nil {
			continue // the template's slices stand in for them
		}
		skip(logger, "resourceslice", "", s.Name, snap.SetResourceSlice(s))
	}
	registered := observe.Registered(state.Nodes)
	expendable, nominated := 0, 0
	// Pods to place, with their nodes; their PodInfos are made (or kept
	// from the last pass) up front, in parallel.
	var place []*corev1.Pod
	var on []string
	var holding []heldPod
	for _, pod := range state.Pods {
		held := ""
		if pod.Spec.NodeName == "" {
			held = observe.HeldNode(pod, registered, state.VolumeBindings)
		}
		switch {
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		case pod.Spec.NodeName != "" && observe.IsExpendable(pod, opts.ExpendableCutoff):
			expendable++
		case pod.Spec.NodeName != "":
			place, on = append(place, pod), append(on, pod.Spec.NodeName)
		case held != "" && opts.Runner != nil && len(pod.Spec.ResourceClaims) > 0:
			holding = append(holding, heldPod{pod, held}) // placed with their claims, below
		case held != "":
			nominated++
			place, on = append(place, pod), append(on, held)
		default:
			skip(logger, "pod", pod.Namespace, pod.Name, snap.AddPendingPod(pod))
		}
	}
	infos := opts.PodInfos.of(ctx, place, state.Pods)
	for i, pod := range place {
		if infos[i] != nil {
			skip(logger, "pod", pod.Namespace, pod.Name, snap.AddPodCopy(pod, on[i], infos[i]))
		} else {
			skip(logger, "pod", pod.Namespace, pod.Name, snap.AddPod(pod, on[i]))
		}
	}
	if len(holding) > 0 {
		res.Unheld = placeHeld(ctx, opts, holding)
		nominated += len(holding) - len(res.Unheld)
	}
	var errs []error
	for _, g := range groups {
		if g.Template == nil || g.Upcoming() == 0 {
			continue
		}
		for i, tmpl := range upcomingTemplates(g, g.Upcoming()) {
			name := fmt.Sprintf("%s-upcoming-%d", g.Id, i)
			var err error
			if opts.Runner != nil {
				err = template.AddInstance(ctx, opts.Runner, tmpl, name)
			} else {
				err = addTemplateNode(snap, tmpl, name, nil)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("upcoming node of %s: %w", g.Id, err))
				break
			}
			res.Upcoming = append(res.Upcoming, name)
			res.GroupOf[name] = g.Id
		}
	}
	logger.V(3).Info("Snapshot built", "nodes", len(res.Nodes), "upcoming", len(res.Upcoming), "pods", len(state.Pods), "claims", len(state.ResourceClaims),
		"expendableLeftOut", expendable, "heldPlaced", nominated)
	return res, errors.Join(errs...)
}

// addTemplateNode adds an instance of the group's template named name. For
// a registered node that is still booting, real keeps its labels (the
// scheduler sees those), while devices and start-up pods come from the
// template.
func addTemplateNode(snap *simsnapshot.Snapshot, tmpl *cloudprovider.NodeTemplate, name string, real *corev1.Node) error {
	node, slices, pods := template.Instantiate(tmpl, name)
	if real != nil {
		node = real.DeepCopy()
		// Booting nodes carry not-ready taints the scheduler would reject;
		// they are about to go away, so the template's taints stand.
		node.Spec.Taints = tmpl.Node.Spec.Taints
		node.Status = *tmpl.Node.Status.DeepCopy()
		pods = nil // the DaemonSet pods will be real pods once it runs
	}
	if err := snap.AddNode(node); err != nil {
		return err
	}
	return addAll(snap, name, slices, pods)
}

func addAll(snap *simsnapshot.Snapshot, node string, slices []*resourceapi.ResourceSlice, pods []*corev1.Pod) error {
	for _, s := range slices {
		if err := snap.SetResourceSlice(s); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if err := snap.AddPod(p, node); err != nil {
			return err
		}
	}
	return nil
}

// skip logs an object left out of the snapshot. Its name is made only
// then: a build loads tens of thousands of objects, and almost none fail.
func skip(logger klog.Logger, kind, namespace, name string, err error) {
	if err == nil {
		return
	}
	what := kind
	if name != "" {
		what = kind + "/" + name
		if namespace != "" {
			what = kind + "/" + namespace + "/" + name
		}
	}
	logger.V(4).Info("Left out of the snapshot", "object", what, "err", err)
}
