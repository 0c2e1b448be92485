package status

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	nodeutil "k8s.io/kubernetes/pkg/util/node"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/backoff"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// MaxPodsNotHelped bounds the podsNotHelped section; the total is kept.
const MaxPodsNotHelped = 50

// BuildInput is what one loop tells the status. The sections other features
// own (scale-down, reservations) are plain structs, so that their code
// fills them in without this package knowing it.
type BuildInput struct {
	Now time.Time
	// Healthy is false when the loop could not observe or simulate, or
	// found too many nodes unready to act; Message says why.
	Healthy bool
	Message string
	Nodes   []*corev1.Node
	Groups  []*nodegroups.Info
	// Backoff returns a group's backoff, if it is backed off now.
	Backoff       func(group string, now time.Time) (backoff.Entry, bool)
	ScaleDown     ScaleDownInput
	Gangs         []GangStatus
	Reservations  []ReservationStatus
	NotHelped     []PodNotHelped
	Disagreements []DisagreementStatus
	HeldBack      []HeldBackStatus
}

// ScaleDownInput is the scale-down's part: how many nodes are candidates
// for removal, in all and per group.
type ScaleDownInput struct {
	Candidates int
	PerGroup   map[string]int
}

// Builder builds AutoscalerStatus documents, keeping each status's last transition
// time across loops as upstream does.
type Builder struct {
	prev *AutoscalerStatus
}

// Build returns the status for in.
func (b *Builder) Build(in BuildInput) *AutoscalerStatus {
	now := metav1.NewTime(in.Now)
	s := &AutoscalerStatus{Time: now, AutoscalerStatus: "Running", Message: in.Message}
	health := HealthHealthy
	if !in.Healthy {
		health = HealthUnhealthy
	}
	s.ClusterWide.Health = Health{Status: health, NodeCounts: clusterCounts(in.Nodes, in.Groups), LastProbeTime: now}
	clusterUp := ScaleUpNoActivity
	for _, g := range in.Groups {
		ng := b.group(g, in, now)
		if ng.ScaleUp.Status == ScaleUpInProgress {
			clusterUp = ScaleUpInProgress
		}
		s.NodeGroups = append(s.NodeGroups, ng)
	}
	sort.Slice(s.NodeGroups, func(i, j int) bool { return s.NodeGroups[i].Name < s.NodeGroups[j].Name })
	s.ClusterWide.ScaleUp = ScaleUpStatus{Status: clusterUp, LastProbeTime: now}
	s.ClusterWide.ScaleDown = scaleDown(in.ScaleDown.Candidates, now)
	s.Gangs, s.Reservations, s.SchedulerDisagreements = in.Gangs, in.Reservations, in.Disagreements
	s.PodsNotHelpedTotal = len(in.NotHelped)
	s.PodsNotHelped = in.NotHelped
	if len(s.PodsNotHelped) > MaxPodsNotHelped {
		s.PodsNotHelped = s.PodsNotHelped[:MaxPodsNotHelped]
	}
	s.HeldBackTotal, s.HeldBack = len(in.HeldBack), in.HeldBack
	if len(s.HeldBack) > MaxHeldBack {
		s.HeldBack = s.HeldBack[:MaxHeldBack]
	}
	b.carryTransitions(s)
	b.prev = s
	return s
}

func (b *Builder) group(g *nodegroups.Info, in BuildInput, now metav1.Time) GroupSection {
	target, minSize, maxSize := g.Target, g.Min, g.Max
	ng := GroupSection{Name: g.Id, TemplateSource: g.TemplateSource, TemplateSkipped: g.TemplateSkipped}
	health := HealthHealthy
	if g.Template == nil {
		health = HealthUnhealthy
		ng.TemplateError = fmt.Sprint(g.TemplateErr)
	}
	ng.Health = Health{Status: health, CloudProviderTarget: &target, MinSize: &minSize, MaxSize: &maxSize, LastProbeTime: now,
		NodeCounts: NodeCounts{
			Registered:   RegisteredNodes{Total: len(g.Ready) + len(g.Booting), Ready: len(g.Ready), NotStarted: len(g.Booting)},
			Unregistered: g.Upcoming(),
		}}
	ng.ScaleUp = ScaleUpStatus{Status: ScaleUpNoActivity, LastProbeTime: now}
	if g.Upcoming() > 0 || len(g.Booting) > 0 {
		ng.ScaleUp.Status = ScaleUpInProgress
	}
	if in.Backoff != nil {
		if st, off := in.Backoff(g.Id, in.Now); off {
			ng.ScaleUp.Status = ScaleUpBackoff
			ng.ScaleUp.BackoffInfo = &BackoffInfo{ErrorCode: st.Reason, ErrorMessage: fmt.Sprintf("scale-up failed (%s); backed off", st.Reason),
				Until: metav1.NewTime(st.Until), Failures: st.Failures}
		}
	}
	ng.ScaleDown = scaleDown(in.ScaleDown.PerGroup[g.Id], now)
	if g.Template != nil {
		ng.DRAPools = Pools(g.Template)
	}
	if g.OptionsFrom != "" {
		o := g.Options
		ng.Options = &GroupOptions{From: g.OptionsFrom, ScaleDownUtilizationThreshold: o.ScaleDownUtilizationThreshold,
			ScaleDownGpuUtilizationThreshold: o.ScaleDownGpuUtilizationThreshold, ScaleDownUnneededTime: metav1.Duration{Duration: o.ScaleDownUnneededTime},
			ScaleDownUnreadyTime: metav1.Duration{Duration: o.ScaleDownUnreadyTime}, MaxNodeProvisionTime: metav1.Duration{Duration: o.MaxNodeProvisionTime},
			ZeroOrMaxNodeScaling: o.ZeroOrMaxNodeScaling}
	}
	return ng
}

func scaleDown(candidates int, now metav1.Time) ScaleDownStatus {
	sd := ScaleDownStatus{Status: ScaleDownNoCandidates, LastProbeTime: now}
	if candidates > 0 {
		sd.Status, sd.Candidates = ScaleDownCandidatesPresent, candidates
	}
	return sd
}

func clusterCounts(nodes []*corev1.Node, groups []*nodegroups.Info) NodeCounts {
	var c NodeCounts
	booting := map[string]bool{}
	for _, g := range groups {
		for _, n := range g.Booting {
			booting[n.Name] = true
		}
		c.Unregistered += g.Upcoming()
	}
	for _, n := range nodes {
		c.Registered.Total++
		switch {
		case booting[n.Name]:
			c.Registered.NotStarted++
		case nodeutil.IsNodeReady(n):
			c.Registered.Ready++
		default:
			c.Registered.Unready++
		}
	}
	return c
}

// Pools summarises the ResourceSlices of a template node: devices and
// shared counters per driver and pool.
func Pools(t *cloudprovider.NodeTemplate) []DRAPool {
	type key struct{ driver, pool string }
	byKey := map[key]*DRAPool{}
	var keys []key
	for _, s := range t.ResourceSlices {
		k := key{s.Spec.Driver, s.Spec.Pool.Name}
		p := byKey[k]
		if p == nil {
			p = &DRAPool{Driver: k.driver, Pool: k.pool}
			byKey[k] = p
			keys = append(keys, k)
		}
		p.Devices += len(s.Spec.Devices)
		for _, set := range s.Spec.SharedCounters {
			for name, c := range set.Counters {
				if p.Counters == nil {
					p.Counters = map[string]string{}
				}
				p.Counters[set.Name+"/"+name] = c.Value.String()
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].driver != keys[j].driver {
			return keys[i].driver < keys[j].driver
		}
		return keys[i].pool < keys[j].pool
	})
	out := make([]DRAPool, len(keys))
	for i, k := range keys {
		out[i] = *byKey[k]
	}
	return out
}

// carryTransitions keeps the previous transition time of every status
// that did not change.
func (b *Builder) carryTransitions(s *AutoscalerStatus) {
	now := s.Time
	carry := func(cur string, t *metav1.Time, prev string, prevT metav1.Time, had bool) {
		*t = now
		if had && cur == prev {
			*t = prevT
		}
	}
	p := b.prev
	had := p != nil
	var pc ClusterWide
	if had {
		pc = p.ClusterWide
	}
	carry(s.ClusterWide.Health.Status, &s.ClusterWide.Health.LastTransitionTime, pc.Health.Status, pc.Health.LastTransitionTime, had)
	carry(s.ClusterWide.ScaleUp.Status, &s.ClusterWide.ScaleUp.LastTransitionTime, pc.ScaleUp.Status, pc.ScaleUp.LastTransitionTime, had)
	carry(s.ClusterWide.ScaleDown.Status, &s.ClusterWide.ScaleDown.LastTransitionTime, pc.ScaleDown.Status, pc.ScaleDown.LastTransitionTime, had)
	prevGroups := map[string]GroupSection{}
	if had {
		for _, g := range p.NodeGroups {
			prevGroups[g.Name] = g
		}
	}
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		pg, ok := prevGroups[g.Name]
		carry(g.Health.Status, &g.Health.LastTransitionTime, pg.Health.Status, pg.Health.LastTransitionTime, ok)
		carry(g.ScaleUp.Status, &g.ScaleUp.LastTransitionTime, pg.ScaleUp.Status, pg.ScaleUp.LastTransitionTime, ok)
		carry(g.ScaleDown.Status, &g.ScaleDown.LastTransitionTime, pg.ScaleDown.Status, pg.ScaleDown.LastTransitionTime, ok)
	}
}

// ReservationsFrom turns the provider's reservations into the section.
func ReservationsFrom(rs []cloudprovider.ReservedCapacity, source string) []ReservationStatus {
	out := make([]ReservationStatus, 0, len(rs))
	for _, r := range rs {
		x := ReservationStatus{ID: r.ID, Kind: string(r.Kind), Source: source, NodeGroups: r.NodeGroups, Count: r.Count, InUse: r.InUse}
		if !r.Start.IsZero() {
			t := metav1.NewTime(r.Start)
			x.Start = &t
		}
		if !r.End.IsZero() {
			t := metav1.NewTime(r.End)
			x.End = &t
		}
		out = append(out, x)
	}
	return out
}
