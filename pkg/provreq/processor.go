package provreq

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	v1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	provlisters "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/client/listers/autoscaling.x-k8s.io/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/gang"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/internal/objorder"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/limits"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/act"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// GangPlanner plans gangs all or nothing (plan.Planner).
type GangPlanner interface {
	PlanGangs(ctx context.Context, runner *framework.Runner, gangs []*gang.Gang, candidates []string,
		groups []*nodegroups.Info, usage limits.Usage, now time.Time) ([]plan.GangOutcome, limits.Usage, error)
}

// ScaleUpLauncher carries out scale-ups (act.Launcher); the parts of one gang
// succeed together or are undone.
type ScaleUpLauncher interface {
	Execute(ctx context.Context, ups []act.ScaleUp, now time.Time) []act.LaunchResult
}

// revokeAfter is how many loops in a row a booking may not fit before its
// capacity counts as revoked: one miss may be a node between states.
const revokeAfter = 2

// Processor serves the requests of our classes, one pass per loop.
type Processor struct {
	opts      Options
	requests  provlisters.ProvisioningRequestLister
	templates corelisters.PodTemplateLister
	client    StatusClient
	planner   GangPlanner
	actuator  ScaleUpLauncher
	recorder  record.EventRecorder
	// misses counts, per booked request, the loops in a row its pods did
	// not fit.
	misses    map[types.UID]int
	informers *Informers // those Start started
}

// NewProcessor returns a processor reading through the listers and
// writing status through client.
func NewProcessor(opts Options, requests provlisters.ProvisioningRequestLister, templates corelisters.PodTemplateLister,
	client StatusClient, planner GangPlanner, actuator ScaleUpLauncher, recorder record.EventRecorder) *Processor {
	if opts.TemplateGrace == 0 {
		opts.TemplateGrace = DefaultTemplateGrace
	}
	if opts.MaxPods <= 0 {
		opts.MaxPods = config.DefaultMaxPodsPerProvisioningRequest
	}
	return &Processor{opts: opts, requests: requests, templates: templates, client: client,
		planner: planner, actuator: actuator, recorder: recorder, misses: map[types.UID]int{}}
}

// ProcessInput is the loop's state the processor works on. The runner's snapshot
// holds the cluster with the upcoming nodes; what the processor books or
// plans stays in it, taken, for the rest of the loop.
type ProcessInput struct {
	Runner     *framework.Runner
	Candidates []string
	Groups     []*nodegroups.Info
	// Usage is what the cluster has and has asked for; Run returns it
	// with the scale-ups it made added.
	Usage limits.Usage
	// Planner is the pass's planner (with its reservations count); nil:
	// the one the processor was made with.
	Planner GangPlanner
	// Pods are all pods of the cluster, to find the consumers.
	Pods []*corev1.Pod
	Now  time.Time

	usage *limits.Usage // Run's running count
}

// Decisions are what a pass decided for the requests, in the order they
// were served, for Launch. The last may be a scale-up to launch, whose
// plan is in a snapshot fork left open until Launch keeps or drops it:
// one per pass, so that forks never nest (the requests after it are
// served in the next pass).
type Decisions struct {
	in    ProcessInput
	items []decided
}

// pending is the decided scale-up to launch, nil for none.
func (d *Decisions) pending() *decided {
	if d == nil || len(d.items) == 0 || d.items[len(d.items)-1].u.launch == nil {
		return nil
	}
	return &d.items[len(d.items)-1]
}

// Drop closes the fork of a decided scale-up that is not launched (this
// replica no longer leads), dropping its plan.
func (d *Decisions) Drop(ctx context.Context) {
	if x := d.pending(); x != nil {
		if err := d.in.Runner.Snapshot().Revert(); err != nil {
			klog.FromContext(ctx).Error(err, "Closing the snapshot fork failed")
		}
		x.u.launch = nil
	}
}

type decided struct {
	pr *v1.ProvisioningRequest
	u  *update
}

// Run decides and launches at once (Decide, then Launch): what the loop
// does in two stages. It returns the scale-ups made (without pods: the
// request's pods are not API objects).
func (p *Processor) Run(ctx context.Context, in ProcessInput) ([]act.LaunchResult, limits.Usage) {
	d, usage := p.Decide(ctx, in)
	if d == nil {
		return nil, usage
	}
	return p.Launch(ctx, d)
}

// Launch makes the scale-up d decided, if any, keeping its plan in the
// snapshot when it was made and dropping it (and the usage it took) when
// it failed; then it writes every request's conditions and events. It
// returns the scale-ups made and the pass's usage after them.
func (p *Processor) Launch(ctx context.Context, d *Decisions) ([]act.LaunchResult, limits.Usage) {
	if d == nil {
		return nil, limits.Usage{}
	}
	usage := *d.in.usage
	if x := d.pending(); x != nil {
		p.launchOne(ctx, x.pr, d.in, x.u)
		end := d.in.Runner.Snapshot().Commit
		if failedLaunch(x.u.results) {
			end, usage = d.in.Runner.Snapshot().Revert, x.u.launch.usageBefore
		}
		if err := end(); err != nil {
			klog.FromContext(ctx).Error(err, "Closing the snapshot fork failed")
		}
	}
	var results []act.LaunchResult
	for _, x := range d.items {
		results = append(results, x.u.results...)
		p.write(ctx, x.pr, x.u)
	}
	return results, usage
}

func failedLaunch(results []act.LaunchResult) bool {
	for _, r := range results {
		if r.Err != nil {
			return true
		}
	}
	return false
}

// Decide books the capacity of Provisioned requests, then answers or plans
// the others, oldest first, changing nothing but the snapshot (what it
// books or plans stays there, taken, for the rest of the pass) and usage.
// A request that cannot be served gets a condition saying why (written by
// Launch); it never stops the others.
func (p *Processor) Decide(ctx context.Context, in ProcessInput) (*Decisions, limits.Usage) {
	logger := klog.FromContext(ctx)
	all, err := p.requests.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing ProvisioningRequests failed")
		return nil, in.Usage
	}
	// The requests served in turn take from one running count.
	usage := in.Usage
	in.usage = &usage
	if in.Planner == nil {
		in.Planner = p.planner
	}
	var reqs []*v1.ProvisioningRequest
	for _, pr := range all {
		if ours(pr.Spec.ProvisioningClassName) && pr.DeletionTimestamp == nil {
			reqs = append(reqs, pr)
		}
	}
	// Booked capacity goes into the snapshot before anything else asks.
	sort.SliceStable(reqs, func(i, j int) bool {
		bi, bj := provisioned(reqs[i]), provisioned(reqs[j])
		if bi != bj {
			return bi
		}
		ti, tj := reqs[i].CreationTimestamp, reqs[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return objorder.Compare(reqs[i].Namespace, reqs[i].Name, reqs[j].Namespace, reqs[j].Name) < 0
	})
	consumed := boundConsumers(in.Pods)
	seen := map[types.UID]bool{}
	d := &Decisions{in: in}
	for _, pr := range reqs {
		seen[pr.UID] = true
	}
	for _, pr := range reqs {
		u := p.serve(ctx, pr, in, consumed[pr.Namespace+"/"+pr.Name])
		d.items = append(d.items, decided{pr: pr, u: u})
		if u.launch != nil {
			logger.V(2).Info("A scale-up of a ProvisioningRequest is to be launched; the requests after it are served next pass", "provisioningRequest", klog.KObj(pr))
			break
		}
	}
	for uid := range p.misses {
		if !seen[uid] {
			delete(p.misses, uid)
		}
	}
	return d, usage
}

func provisioned(pr *v1.ProvisioningRequest) bool {
	return apimeta.IsStatusConditionTrue(pr.Status.Conditions, v1.Provisioned)
}

// done tells whether a request is past serving: failed, its booking over,
// or its capacity revoked.
func done(conds []metav1.Condition) bool {
	return apimeta.IsStatusConditionTrue(conds, v1.Failed) || apimeta.IsStatusConditionTrue(conds, v1.BookingExpired) ||
		apimeta.IsStatusConditionTrue(conds, v1.CapacityRevoked)
}
