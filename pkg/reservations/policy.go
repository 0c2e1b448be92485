package reservations

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/cloudprovider"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/nodegroups"
)

// ObjectSource lists the CapacityReservation objects (a dynamic informer).
type ObjectSource interface {
	List() []*unstructured.Unstructured
}

// Options configure the policy.
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

// Policy is what lives across passes: where reservations come from (the
// provider, the CapacityReservation objects), the launches the provider
// does not show yet, and the metrics. Each pass counts once (Count) and
// every reader of that pass reads the Count. A nil Policy counts nothing.
type Policy struct {
	opts     Options
	provider cloudprovider.CloudProvider
	objects  ObjectSource // nil: no CRD
	metrics  *metrics.ReservationMetrics
	ledger   *ledger
	latest   atomic.Pointer[Book]
}

// New returns the policy. provider, objects and m may be nil.
func New(opts Options, provider cloudprovider.CloudProvider, objects ObjectSource, m *metrics.ReservationMetrics) *Policy {
	return &Policy{opts: opts, provider: provider, objects: objects, metrics: m, ledger: newLedger(opts.LaunchTTL)}
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
	c := &Count{policy: s, complete: true, taken: map[string]int{}}
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
			c.objects = append(c.objects, Object{CR: crs[i], Reservation: crds[i]})
		}
		c.rejected = bad
	}
	views := make([]GroupNodes, 0, len(groups))
	for _, g := range groups {
		v := GroupNodes{ID: g.Id, Size: s.ledger.size(g.Id, g.Size(), now)}
		if n, ok := g.Group.(cloudprovider.ReservationNamer); ok {
			v.Reservation = n.CapacityReservation()
		}
		if g.Template != nil {
			v.Template = g.Template.Node
		}
		v.Nodes = append(append(v.Nodes, g.Ready...), g.Booting...)
		views = append(views, v)
	}
	c.Book = NewBook(now, s.opts.EndMargin, res, views)
	s.latest.Store(c.Book)
	s.observe(c.Book, pods)
	if s.metrics != nil {
		s.metrics.Invalid.Set(float64(len(c.rejected)))
	}
	return c
}

// Book is the latest pass's count, or nil before the first (for a status
// written after a pass failed before counting).
func (s *Policy) Book() *Book {
	if s == nil {
		return nil
	}
	return s.latest.Load()
}
