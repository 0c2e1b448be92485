package explain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/load"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/loop"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/pending"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Run runs the pass the loop runs, without the stages that act (a dry
// run of l), and explains what it decided for one pod. A pod the
// autoscaler would leave alone (not yet found unschedulable, too young,
// below the priority cutoff) is planned for as if it were pending, and
// its state says so. runner is the pass's simulated scheduler; sel the
// pending stage, which says why a pod is left alone.
func Run(ctx context.Context, l *loop.Loop, runner *framework.Runner, sel *pending.Stage, key types.NamespacedName, now time.Time) (*Report, error) {
	st := pass.New(now)
	var rep *Report
	var pod *corev1.Pod
	// heldOn is the node the pod is held on (HeldNode), binding whether it
	// is held there by its volume rather than a nomination.
	var heldOn string
	var binding bool
	errScheduled := errors.New("scheduled")
	err := l.DryRun(ctx, st, func(name string) error {
		switch name {
		case observe.StageName:
			cluster := pass.Get(st, observe.Cluster)
			if pod = findPod(cluster.Pods, key); pod == nil {
				return fmt.Errorf("pod %s not found", key)
			}
			rep = &Report{Pod: key.String(), SchedulerMessage: scheduledMessage(pod)}
			if pod.Spec.NodeName != "" {
				rep.State, rep.Node = "Scheduled", pod.Spec.NodeName
				rep.Summary = "bound to node " + pod.Spec.NodeName + ": nothing to explain"
				return errScheduled
			}
			registered := observe.Registered(cluster.Nodes)
			if heldOn = observe.HeldNode(pod, registered, cluster.VolumeBindings); heldOn != "" {
				// Judged once the snapshot says whether the node still
				// takes it (load.Loaded.Unheld).
				binding = observe.NominatedNode(pod, registered) == ""
				return nil
			}
			pass.Put(st, pending.Extra, []*corev1.Pod{pod})
		case load.StageName:
			built := pass.Get(st, load.Built)
			if heldOn != "" && !containsPod(built.Unheld, pod) {
				// The pass holds its place there, as the loop does.
				rep.State, rep.Node = "Nominated", heldOn
				rep.Summary = "the scheduler is placing it on node " + heldOn + " (preemption or volume provisioning under way): no scale-up is needed"
				if binding {
					rep.State = "Binding"
				}
				return errScheduled
			}
			if heldOn != "" {
				// Pods held on the node before it took what it needs
				// there: it is planned like any pending pod.
				pass.Put(st, pending.Extra, []*corev1.Pod{pod})
			}
			verdicts, err := runner.RunFilters(ctx, pod, built.Candidates())
			if err != nil {
				return fmt.Errorf("filter pod %s on existing nodes: %w", key, err)
			}
			rep.ExistingNodes = summarize(verdicts)
		case pending.StageName:
			rep.State = "Unschedulable"
			if containsPod(pass.Get(st, pending.Added), pod) {
				rep.State = "Ignored"
				if !observe.IsUnschedulable(pod) {
					rep.State = "Pending"
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errScheduled):
		return rep, nil
	case err != nil:
		return nil, err
	}
	explainPod(rep, pod, pass.Get(st, nodegroups.Groups), pass.Get(st, load.Built), pass.Get(st, fitexisting.Fits),
		pass.Get(st, plan.Result), pass.Get(st, plan.Gangs), pass.Get(st, pending.Waiting))
	if containsPod(pass.Get(st, pending.Added), pod) {
		ignored(rep, sel.Selection(st).Skip(pod, st.Started))
	}
	return rep, nil
}

// ignored rewrites the report of a pod the loop does not pick (why, as
// observe says it; "" for one a ProvisioningRequest provides for): the
// loop adds nothing for it, so no group scales up; what would happen were
// it pending is kept in the messages.
func ignored(rep *Report, why string) {
	if why == "" {
		why = "a ProvisioningRequest provides for it"
	}
	rep.Summary = "the autoscaler leaves it alone: " + why + "; were it pending: " + rep.Summary
	for i := range rep.NodeGroups {
		if v := &rep.NodeGroups[i]; v.Verdict == VerdictScaleUp {
			v.Verdict, v.Message = VerdictIgnored, "would be "+v.Message
		}
	}
}

// explainPod fills in the verdicts for pod from what the pass decided.
func explainPod(rep *Report, pod *corev1.Pod, groups []*nodegroups.Info, built *load.Loaded,
	fits map[*corev1.Pod]string, p *plan.Plan, outcomes []plan.GangOutcome, waiting []gang.Waiting) {
	ups := map[string]int{}
	var reasons []plan.GroupReason
	helped := false
	for fp, node := range fits {
		if fp.UID == pod.UID {
			rep.Node, helped = node, true
			if _, coming := built.GroupOf[node]; coming {
				rep.Summary = fmt.Sprintf("fits node %s, which is coming: no further scale-up is needed", node)
				if why := notUsable(groups, node); why != "" {
					rep.Summary = fmt.Sprintf("fits node %s, which is registered but not usable yet (%s): no further scale-up is needed", node, why)
				}
			} else {
				rep.Summary = fmt.Sprintf("fits the existing node %s: no scale-up is needed; if the pod stays unschedulable, "+
					"the autoscaler and the scheduler disagree (see the SchedulerDisagreement event)", node)
			}
		}
	}
	for _, o := range outcomes {
		if !containsPod(o.Gang.Pending, pod) {
			continue
		}
		rep.Gang = o.Gang.Key()
		for _, up := range o.ScaleUps {
			ups[up.Group.Id] += up.Delta
		}
		rep.GangDomains, rep.GangMembers = gangDomains(o), gangMembers(o)
		reasons = o.Reasons
		switch {
		case o.FitsExisting:
			helped, rep.Summary = true, "the gang fits existing or coming capacity: no scale-up is needed"
		case len(o.ScaleUps) > 0:
			helped, rep.Summary = true, "the gang triggers a scale-up"
		default:
			rep.Summary = "the gang cannot be placed whole: " + o.Message
		}
	}
	for _, w := range waiting {
		if containsPod(w.Pods, pod) {
			rep.Gang = w.Namespace + "/" + w.Name
			rep.Summary = "the gang waits: " + w.Reason
		}
	}
	if p != nil {
		for _, up := range p.ScaleUps {
			if containsPod(up.Pods, pod) {
				ups[up.Group.Id] += up.Delta
				helped = true
				rep.Summary = fmt.Sprintf("triggers a scale-up of %s by %d node(s)", up.Group.Id, up.Delta)
			}
		}
		if rs, ok := p.Reasons[pod.UID]; ok {
			reasons = rs
		}
	}
	byGroup := map[string]plan.GroupReason{}
	for _, r := range reasons {
		byGroup[r.Group] = r
	}
	for _, g := range groups {
		v := GroupVerdict{NodeGroup: g.Id}
		r, hasReason := byGroup[g.Id]
		switch {
		case ups[g.Id] > 0:
			v.Verdict, v.Message = VerdictScaleUp, fmt.Sprintf("+%d node(s), %d -> %d (max %d)", ups[g.Id], g.Target, g.Target+ups[g.Id], g.Max)
		case hasReason:
			v.Verdict, v.Reason, v.Message, v.Constraint = VerdictCannotHelp, r.Reason, r.Message, r.Constraint
		case helped:
			v.Verdict = VerdictNotNeeded
		default:
			v.Verdict, v.Message = VerdictCannotHelp, "no estimate"
		}
		rep.NodeGroups = append(rep.NodeGroups, v)
	}
	sort.Slice(rep.NodeGroups, func(i, j int) bool { return rep.NodeGroups[i].NodeGroup < rep.NodeGroups[j].NodeGroup })
	if rep.Summary == "" {
		rep.Summary = "no node group can help"
		if len(groups) == 0 {
			rep.Summary = "the autoscaler manages no node groups"
		}
	}
}

// summarize says how the pod fares on the existing and coming nodes, the
// way the scheduler words it: "0/3 nodes fit: 2 NodeResourcesFit, 1 ...".
func summarize(results []framework.NodeResult) string {
	fit := 0
	byPlugin := map[string]int{}
	for _, r := range results {
		if r.Fits {
			fit++
			continue
		}
		byPlugin[r.Plugin]++
	}
	s := fmt.Sprintf("%d/%d nodes fit", fit, len(results))
	if len(byPlugin) == 0 {
		return s
	}
	plugins := make([]string, 0, len(byPlugin))
	for p := range byPlugin {
		plugins = append(plugins, p)
	}
	sort.Slice(plugins, func(i, j int) bool {
		if byPlugin[plugins[i]] != byPlugin[plugins[j]] {
			return byPlugin[plugins[i]] > byPlugin[plugins[j]]
		}
		return plugins[i] < plugins[j]
	})
	parts := make([]string, len(plugins))
	for i, p := range plugins {
		parts[i] = fmt.Sprintf("%d rejected by %s", byPlugin[p], p)
	}
	return s + ": " + strings.Join(parts, ", ")
}

func findPod(pods []*corev1.Pod, key types.NamespacedName) *corev1.Pod {
	for _, p := range pods {
		if p.Namespace == key.Namespace && p.Name == key.Name {
			return p
		}
	}
	return nil
}

func containsPod(pods []*corev1.Pod, pod *corev1.Pod) bool {
	for _, p := range pods {
		if p.UID == pod.UID {
			return true
		}
	}
	return false
}

func scheduledMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

// notUsable says why a registered node of a group cannot take pods yet.
func notUsable(groups []*nodegroups.Info, node string) string {
	for _, g := range groups {
		if why, ok := g.NotUsable[node]; ok {
			return why
		}
	}
	return ""
}

// gangDomains are the domains tried for a gang, the chosen one marked;
// none for a gang without a topology key.
func gangDomains(o plan.GangOutcome) []DomainVerdict {
	if len(o.Tried) == 1 && o.Tried[0].Domain == "" {
		return nil
	}
	out := make([]DomainVerdict, 0, len(o.Tried))
	for _, t := range o.Tried {
		v := DomainVerdict{Domain: t.Domain, Verdict: DomainCannotHost, Message: t.Message}
		switch {
		case t.Feasible && t.Domain == o.Domain && (o.FitsExisting || len(o.ScaleUps) > 0):
			v.Verdict = DomainChosen
		case t.Feasible:
			v.Verdict = DomainFeasible
		}
		out = append(out, v)
	}
	return out
}

// gangMembers says where the plan puts each pending member: existing or
// coming nodes by name, new nodes by their group and place in its
// scale-up.
func gangMembers(o plan.GangOutcome) []MemberPlacement {
	on := map[*corev1.Pod]string{}
	for pod, node := range o.Existing {
		on[pod] = node
	}
	for _, up := range o.ScaleUps {
		for i, pods := range up.Nodes {
			for _, pod := range pods {
				on[pod] = fmt.Sprintf("new node %d of %d in %s", i+1, up.Delta, up.Group.Id)
			}
		}
	}
	if len(on) == 0 {
		return nil
	}
	out := make([]MemberPlacement, 0, len(o.Gang.Pending))
	for _, pod := range o.Gang.Pending {
		if node, ok := on[pod]; ok {
			out = append(out, MemberPlacement{Pod: pod.Namespace + "/" + pod.Name, Node: node})
		}
	}
	return out
}
