package status

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/disagree"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/report"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/reservations"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/safety"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
)

// StageName is the status stage's name.
const StageName = "status"

// Stage writes the status ConfigMap of every pass, at its end or, for a
// pass that failed, when it failed (Failed).
type Stage struct {
	Writer  *Writer
	Backoff *backoff.Backoff
	// Gate's refusals are the heldBack section; Reservations and Provider
	// give the reservations when the pass ended before counting them.
	Gate         *safety.Gate
	Reservations *reservations.Policy
	Provider     cloudprovider.CloudProvider
	// Written (nil: nothing) counts each write by result (success, error).
	Written func(result string)

	builder Builder
}

var _ pass.Stage = (*Stage)(nil)

func (*Stage) Name() string { return StageName }
func (*Stage) Reads() []pass.AnyKey {
	return pass.Keys(observe.Cluster, observe.Unsafe, nodegroups.Groups, reservations.Counted, scaledown.Done,
		plan.Result, plan.Gangs, disagree.Found)
}
func (*Stage) Writes() []pass.AnyKey { return nil }
func (*Stage) Acts() bool            { return true }

// Run writes the status of a pass that ran to its end.
func (s *Stage) Run(ctx context.Context, st *pass.State) error {
	s.write(ctx, st, nil)
	return nil
}

// Failed writes the status of a pass that failed with err: unhealthy,
// saying why, with what the pass saw before it failed.
func (s *Stage) Failed(ctx context.Context, st *pass.State, err error) { s.write(ctx, st, err) }

func (s *Stage) write(ctx context.Context, st *pass.State, failure error) {
	cluster, groups, unsafe := pass.Get(st, observe.Cluster), pass.Get(st, nodegroups.Groups), pass.Get(st, observe.Unsafe)
	in := BuildInput{Now: st.Started, Healthy: failure == nil && unsafe == "", Groups: groups, Backoff: s.Backoff.Get}
	switch {
	case failure != nil:
		in.Message = failure.Error()
	case unsafe != "":
		in.Message = "not autoscaling: " + unsafe
	}
	if cluster != nil {
		in.Nodes = cluster.Nodes
	}
	in.Reservations = s.reservations(ctx, pass.Get(st, reservations.Counted))
	in.ScaleDown = scaleDownSection(pass.Get(st, scaledown.Done), nodegroups.GroupOf(groups))
	if p := pass.Get(st, plan.Result); p != nil {
		in.NotHelped = notHelped(p)
	}
	if cluster != nil {
		for _, g := range report.GangReports(pass.Get(st, plan.Gangs), nil, cluster) {
			in.Gangs = append(in.Gangs, GangStatus{Namespace: g.Namespace, Name: g.Name, Pods: len(g.Pods), Planned: g.Planned, Message: g.Message})
		}
	}
	for _, d := range pass.Get(st, disagree.Found) {
		in.Disagreements = append(in.Disagreements, DisagreementStatus{Namespace: d.Namespace, Name: d.Name, Node: d.Node,
			Since: metav1.NewTime(d.Since), SchedulerMessage: d.SchedulerMessage, NodeNotUsable: d.NodeNotUsable})
	}
	for _, r := range s.Gate.Refused() {
		in.HeldBack = append(in.HeldBack, HeldBackStatus{Action: string(r.Action), Rule: string(r.Rule), NodeGroup: r.Group, Node: r.Node, Message: r.Detail})
	}
	result := "success"
	if err := s.Writer.Write(ctx, s.builder.Build(in)); err != nil {
		result = "error"
		klog.FromContext(ctx).Error(err, "Writing the status ConfigMap")
	}
	if s.Written != nil {
		s.Written(result)
	}
}

// reservations is the status's section: the pass's count or, when the
// pass ended before counting, the last one (else what the provider says).
func (s *Stage) reservations(ctx context.Context, c *reservations.Count) []ReservationStatus {
	if c != nil && c.Book != nil {
		return reservationSection(c.Book)
	}
	if b := s.Reservations.Book(); b != nil {
		return reservationSection(b)
	}
	if s.Provider == nil {
		return nil
	}
	rs, err := s.Provider.Reservations()
	if errors.Is(err, cloudprovider.ErrNotImplemented) {
		return nil
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Reservations unavailable for the status", "err", err)
		return nil
	}
	return ReservationsFrom(rs, "cloudprovider")
}

// reservationSection is the status's reservations from this pass's book:
// both sources (provider and CapacityReservation objects), counted as the
// planner counts them (booting nodes and requests in flight included).
func reservationSection(b *reservations.Book) []ReservationStatus {
	slots := b.Slots()
	out := make([]ReservationStatus, 0, len(slots))
	for _, sl := range slots {
		r := cloudprovider.ReservedCapacity{ID: sl.ID, Kind: sl.Kind, NodeGroups: sl.NodeGroups, Count: sl.Count, InUse: sl.InUse,
			Start: sl.Start, End: sl.End}
		out = append(out, ReservationsFrom([]cloudprovider.ReservedCapacity{r}, string(sl.Origin))...)
	}
	return out
}

// scaleDownSection is the status's scale-down part: the nodes the last
// scale-down pass found unneeded, in total and per group.
func scaleDownSection(res *scaledown.PassResult, groupOf map[string]string) ScaleDownInput {
	in := ScaleDownInput{PerGroup: map[string]int{}}
	if res == nil || res.Plan == nil {
		return in
	}
	for _, n := range res.Plan.Unneeded {
		in.Candidates++
		if g := groupOf[n]; g != "" {
			in.PerGroup[g]++
		}
	}
	return in
}

func notHelped(p *plan.Plan) []PodNotHelped {
	out := make([]PodNotHelped, 0, len(p.NotHelped))
	for _, pod := range p.NotHelped {
		e := PodNotHelped{Namespace: pod.Namespace, Name: pod.Name}
		for _, r := range p.Reasons[pod.UID] {
			e.Reasons = append(e.Reasons, GroupReasonStatus{NodeGroup: r.Group, Reason: r.Reason, Message: r.Message, Constraint: r.Constraint})
		}
		out = append(out, e)
	}
	return out
}
