package loop

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/status"
)

// NewStatusParts wires disagreement detection and, with
// --write-status-configmap, the status writer.
func NewStatusParts(opts *config.Options, client kubernetes.Interface, recorder record.EventRecorder, m *metrics.Metrics) (*disagree.Detector, *status.Writer) {
	var w *status.Writer
	if opts.WriteStatusConfigMap {
		w = status.NewWriter(client, opts.Namespace, opts.StatusConfigMapName)
	}
	return disagree.New(opts.SchedulerDisagreementThreshold, recorder, m), w
}

// disagreements compares where the simulation placed pending pods with
// what the scheduler did (the status reports them).
func (l *Loop) disagreements(_ context.Context, pass *Pass) error {
	registered := registeredNodes(pass.cluster.Nodes, pass.Groups)
	pass.Disagreements = l.Disagree.Update(withHeld(pass.Fits, pass.cluster.Pods, registered), registered, pass.StartedAt)
	return nil
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

// status writes the status ConfigMap of a pass that ran to its end.
func (l *Loop) status(ctx context.Context, pass *Pass) error {
	l.writeStatus(ctx, pass, pass.cluster, nil, pass.StartedAt)
	return nil
}

// writeStatus writes the status of a pass; failure is the error that
// ended it, if any. A pass that found the cluster unsafe to autoscale is
// unhealthy too, and says why.
func (l *Loop) writeStatus(ctx context.Context, pass *Pass, state *observe.ClusterState, failure error, now time.Time) {
	if l.Status == nil {
		return
	}
	in := status.BuildInput{Now: now, Healthy: failure == nil && pass.Unsafe == "", Groups: pass.Groups, Backoff: l.Backoff.Get}
	switch {
	case failure != nil:
		in.Message = failure.Error()
	case pass.Unsafe != "":
		in.Message = "not autoscaling: " + pass.Unsafe
	}
	if state != nil {
		in.Nodes = state.Nodes
	}
	in.Reservations = l.reservations(ctx, pass.reserved)
	in.ScaleDown = scaleDownSection(pass.ScaleDown, groupOfNode(pass.Groups))
	if pass.Plan != nil {
		in.NotHelped = notHelped(pass)
	}
	if state != nil {
		for _, g := range gangReports(pass.Gangs, nil, state) {
			in.Gangs = append(in.Gangs, status.GangStatus{Namespace: g.Namespace, Name: g.Name, Pods: len(g.Pods), Planned: g.Planned, Message: g.Message})
		}
	}
	for _, d := range pass.Disagreements {
		in.Disagreements = append(in.Disagreements, status.DisagreementStatus{Namespace: d.Namespace, Name: d.Name, Node: d.Node,
			Since: metav1.NewTime(d.Since), SchedulerMessage: d.SchedulerMessage, NodeNotUsable: d.NodeNotUsable})
	}
	for _, r := range l.Gate.Refused() {
		in.HeldBack = append(in.HeldBack, status.HeldBackStatus{Action: string(r.Action), Rule: string(r.Rule), NodeGroup: r.Group, Node: r.Node, Message: r.Detail})
	}
	s := l.statusBuilder.Build(in)
	if err := l.Status.Write(ctx, s); err != nil {
		l.Metrics.StatusWrites.WithLabelValues("error").Inc()
		klog.FromContext(ctx).Error(err, "Writing the status ConfigMap")
		return
	}
	l.Metrics.StatusWrites.WithLabelValues("success").Inc()
}

// reservations is the status's section: the pass's count or, when the
// pass ended before counting, the last one (else what the provider says).
func (l *Loop) reservations(ctx context.Context, c *reservations.Count) []status.ReservationStatus {
	if c != nil && c.Book != nil {
		return reservationSection(c.Book)
	}
	if b := l.Reservations.Book(); b != nil {
		return reservationSection(b)
	}
	rs, err := l.Provider.Reservations()
	if errors.Is(err, cloudprovider.ErrNotImplemented) {
		return nil
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reservations unavailable for the status", "err", err)
		return nil
	}
	return status.ReservationsFrom(rs, "cloudprovider")
}

func notHelped(pass *Pass) []status.PodNotHelped {
	out := make([]status.PodNotHelped, 0, len(pass.Plan.NotHelped))
	for _, p := range pass.Plan.NotHelped {
		e := status.PodNotHelped{Namespace: p.Namespace, Name: p.Name}
		for _, r := range pass.Plan.Reasons[p.UID] {
			e.Reasons = append(e.Reasons, status.GroupReasonStatus{NodeGroup: r.Group, Reason: r.Reason, Message: r.Message, Constraint: r.Constraint})
		}
		out = append(out, e)
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

// groupOfNode maps a registered node to its group's id ("" for none).
func groupOfNode(groups []*nodegroups.Info) func(string) string {
	of := map[string]string{}
	for _, g := range groups {
		for _, n := range g.Ready {
			of[n.Name] = g.Id
		}
		for _, n := range g.Booting {
			of[n.Name] = g.Id
		}
	}
	return func(node string) string { return of[node] }
}
