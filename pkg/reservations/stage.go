package reservations

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// Event reasons on CapacityReservation objects.
const (
	EventInvalid  = "InvalidCapacityReservation"
	EventDraining = "DrainingCapacityBlock"
)

// ObjectSource lists the CapacityReservation objects (a dynamic informer).
type ObjectSource interface {
	List() []*unstructured.Unstructured
}

// Options configure the stage.
type Options struct {
	// EndMargin: a block ending within it is drained and serves only pods
	// that declare they finish before its end.
	EndMargin time.Duration
	// ScaleDownReserved lets scale-down remove idle nodes on reservations.
	ScaleDownReserved bool
	// LaunchTTL is how long a launch counts before the provider shows it
	// (--max-node-provision-time).
	LaunchTTL time.Duration
}

// Policy is the reservations stage of the loop. Its methods are safe on a
// nil Policy (no reservations at all), so the loop needs no checks.
type Policy struct {
	opts     Options
	provider cloudprovider.CloudProvider
	objects  ObjectSource // nil: no CRD
	dyn      dynamic.Interface
	client   kubernetes.Interface
	recorder record.EventRecorder
	metrics  *metrics.ReservationMetrics
	ledger   *ledger
	book     atomic.Pointer[Book]

	mu sync.Mutex
	// taken counts, per group, the nodes of this loop's plan booked onto
	// reservations, for the launched-nodes metric.
	taken map[string]int
	// warned holds the uid/generation of invalid objects already reported.
	warned map[string]bool
	// draining holds the nodes already reported as draining.
	draining map[string]bool
}

// New returns the stage. objects, dyn, client and recorder may be nil in
// tests (then no CRD, no status, no drain, no events).
func New(opts Options, provider cloudprovider.CloudProvider, objects ObjectSource, dyn dynamic.Interface,
	client kubernetes.Interface, recorder record.EventRecorder, m *metrics.ReservationMetrics) *Policy {
	return &Policy{opts: opts, provider: provider, objects: objects, dyn: dyn, client: client, recorder: recorder,
		metrics: m, ledger: newLedger(opts.LaunchTTL), taken: map[string]int{}, warned: map[string]bool{}, draining: map[string]bool{}}
}

// Count is one pass's count of the reservations: the Book every reader
// of the pass (planner, scale-down, status) shares, and what the upkeep
// after it reports and acts on.
type Count struct {
	Book     *Book
	typed    []*crObject
	rejected []Rejected
	// complete: every reservation is known, so a block missing from the
	// list was deleted (not merely unseen) and its cordons may go.
	complete bool
}

// Update counts and then does the upkeep (Count, then Upkeep), for
// callers that do both at once.
func (s *Policy) Update(ctx context.Context, groups []*nodegroups.Info, pods []*corev1.Pod, now time.Time) {
	s.Upkeep(ctx, s.Count(ctx, groups, pods, now), pods)
}

// Count counts every reservation for this pass: what the provider reports
// and what the objects declare, against the groups' nodes (booting and
// requested ones included), and sets the metrics. It changes nothing in
// the cluster. Errors are logged: a bad reservation never stops the loop.
func (s *Policy) Count(ctx context.Context, groups []*nodegroups.Info, pods []*corev1.Pod, now time.Time) *Count {
	if s == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	var res []*Reservation
	c := &Count{complete: true}
	if s.provider != nil {
		list, err := s.provider.Reservations()
		switch {
		case errors.Is(err, cloudprovider.ErrNotImplemented):
		case err != nil:
			c.complete = false
			logger.Error(err, "Cloud provider reservations unavailable; counting only CapacityReservation objects")
		default:
			res = append(res, FromProvider(list)...)
		}
	}
	if s.objects != nil {
		objs := s.objects.List()
		sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
		crds, crs, bad := FromObjects(objs)
		res = append(res, crds...)
		for i := range crs {
			c.typed = append(c.typed, &crObject{cr: crs[i], res: crds[i]})
		}
		c.rejected = bad
	}
	views := make([]GroupNodes, 0, len(groups))
	for _, g := range groups {
		v := GroupNodes{ID: g.Id, Size: s.ledger.size(g.Id, g.Size(), now)}
		if g.Template != nil {
			v.Template = g.Template.Node
		}
		v.Nodes = append(append(v.Nodes, g.Ready...), g.Booting...)
		views = append(views, v)
	}
	c.Book = NewBook(now, s.opts.EndMargin, res, views)
	s.book.Store(c.Book)
	s.mu.Lock()
	s.taken = map[string]int{}
	s.mu.Unlock()
	s.observe(c.Book, pods)
	return c
}

// Upkeep acts on a count: events about invalid objects, the objects'
// status, the drain of the nodes of blocks about to end and the uncordon
// of those drained for a block that no longer ends.
func (s *Policy) Upkeep(ctx context.Context, c *Count, pods []*corev1.Pod) {
	if s == nil || c == nil {
		return
	}
	s.reportRejected(ctx, c.rejected, c.Book)
	s.writeStatus(ctx, c.typed, c.Book)
	s.drain(ctx, c.Book, c.typed, pods)
	if c.complete {
		s.uncordon(ctx, c.Book)
	}
}

// Book is the latest count, or nil before the first loop.
func (s *Policy) Book() *Book {
	if s == nil {
		return nil
	}
	return s.book.Load()
}

// Launched records what a scale-up really added to group (whose size was
// before when the loop began): later loops count it before the provider
// shows it, and the launched-nodes metric says what it landed on.
func (s *Policy) Launched(group string, before, added int, now time.Time) {
	if s == nil || added <= 0 {
		return
	}
	s.ledger.launched(group, before, added, now)
	s.mu.Lock()
	reserved := min(added, s.taken[group])
	s.taken[group] -= reserved
	s.mu.Unlock()
	if s.metrics == nil {
		return
	}
	s.metrics.LaunchedNodes.WithLabelValues(CapacityReserved).Add(float64(reserved))
	if rest := added - reserved; rest > 0 {
		ct := CapacityOnDemand
		if b := s.Book(); b != nil && b.CapacityType(group) == CapacitySpot {
			ct = CapacitySpot
		}
		s.metrics.LaunchedNodes.WithLabelValues(ct).Add(float64(rest))
	}
}

// crObject is a valid CapacityReservation with its model.
type crObject struct {
	cr  *v1alpha1.CapacityReservation
	res *Reservation
}
