// Package stranded is the loop stage that measures, per node and per node
// group, the DRA device capacity that is free and the part of it that no
// pending or recently seen request shape can use (simulator/fragmentation
// decides with probes through the real framework), within a time budget
// per pass, and exports it as metrics.
package stranded

import (
	"context"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot"
)

// measureAhead is how many nodes the meter has measured at once
// (fragmentation.Analyzer.MeasureAhead) before it analyses them one by one.
const measureAhead = 1024

// Meter keeps the last figures of every node across passes, so that a
// pass cut short by the budget still reports every node (those not
// reached with their previous figures) and the next pass starts where it
// stopped.
type Meter struct {
	analyzer *fragmentation.Analyzer
	shapes   *fragmentation.Shapes
	budget   time.Duration
	metrics  *metrics.Sharing
	// clock is time.Now but for tests.
	clock func() time.Time

	last       map[string]fragmentation.NodeReport
	cursor     int
	classesKey string
}

// New returns the stage. m may be nil (no metrics).
func New(a *fragmentation.Analyzer, shapes *fragmentation.Shapes, budget time.Duration, m *metrics.Sharing) *Meter {
	return &Meter{analyzer: a, shapes: shapes, budget: budget, metrics: m, clock: time.Now, last: map[string]fragmentation.NodeReport{}}
}

// MeterInput is what one pass looks at.
type MeterInput struct {
	Snapshot *snapshot.Snapshot
	// Pods are all observed pods: pending and running ones both add
	// their request shapes.
	Pods []*corev1.Pod
	// Nodes are the registered nodes in the snapshot.
	Nodes []string
	// GroupOf maps a node to its node group; nodes of no group count
	// under "".
	GroupOf map[string]string
	// DeviceClasses: when they change, memoised answers are dropped.
	DeviceClasses []*resourceapi.DeviceClass
}

// Figures are one pass's numbers.
type Figures struct {
	Nodes map[string]fragmentation.NodeReport
	// Groups sums the nodes of each group.
	Groups map[string]Totals
	// Measured counts the nodes measured in this pass; the others keep
	// their last figures because the budget ran out.
	Measured int
}

// Totals are a group's sums.
type Totals struct{ Total, Free, Stranded fragmentation.Amounts }

// Run measures as many nodes as the budget allows and updates the metrics.
// Errors on one node are logged and leave that node's previous figures.
func (s *Meter) Run(ctx context.Context, in MeterInput, now time.Time) *Figures {
	logger := klog.FromContext(ctx)
	start := s.clock()
	if key := classesKey(in.DeviceClasses); key != s.classesKey {
		s.analyzer.Forget()
		s.classesKey = key
	}
	s.shapes.Observe(in.Snapshot, in.Pods, now)
	shapes := s.shapes.Active(now)
	present := make(map[string]bool, len(in.Nodes))
	for _, n := range in.Nodes {
		present[n] = true
	}
	for n := range s.last {
		if !present[n] {
			delete(s.last, n)
		}
	}
	rep := &Figures{Nodes: map[string]fragmentation.NodeReport{}, Groups: map[string]Totals{}}
	nodes := append([]string(nil), in.Nodes...)
	sort.Strings(nodes)
	if s.cursor >= len(nodes) {
		s.cursor = 0
	}
	calls := s.analyzer.Calls
	var ahead []string
	for i := range nodes {
		if i > 0 && s.clock().Sub(start) > s.budget {
			s.cursor = (s.cursor + i) % len(nodes)
			logger.V(2).Info("Stranded-capacity budget spent; the other nodes keep their last figures",
				"measured", i, "nodes", len(nodes), "budget", s.budget)
			break
		}
		if i%measureAhead == 0 {
			// The next nodes' states are read side by side; a batch at a
			// time, so that the budget still bounds the pass.
			ahead = ahead[:0]
			for j := i; j < min(i+measureAhead, len(nodes)); j++ {
				ahead = append(ahead, nodes[(s.cursor+j)%len(nodes)])
			}
			s.analyzer.MeasureAhead(ahead)
		}
		node := nodes[(s.cursor+i)%len(nodes)]
		nr, err := s.analyzer.Node(ctx, node, shapes)
		if err != nil {
			logger.Error(err, "Measuring stranded capacity failed", "node", node)
			continue
		}
		s.last[node] = nr
		rep.Measured++
		logger.V(4).Info("Node device capacity", "node", node, "total", nr.Total, "free", nr.Free, "stranded", nr.Stranded)
	}
	for node, nr := range s.last {
		rep.Nodes[node] = nr
		g := in.GroupOf[node]
		t, ok := rep.Groups[g]
		if !ok {
			t = Totals{Total: fragmentation.Amounts{}, Free: fragmentation.Amounts{}, Stranded: fragmentation.Amounts{}}
		}
		t.Total.Add(nr.Total)
		t.Free.Add(nr.Free)
		t.Stranded.Add(nr.Stranded)
		rep.Groups[g] = t
	}
	s.export(rep, len(shapes))
	logger.V(3).Info("Stranded capacity measured", "nodes", len(nodes), "measured", rep.Measured, "shapes", len(shapes),
		"frameworkCalls", s.analyzer.Calls-calls, "duration", s.clock().Sub(start))
	return rep
}

func (s *Meter) export(rep *Figures, shapes int) {
	m := s.metrics
	if m == nil {
		return
	}
	m.Capacity.Reset()
	m.FreeCapacity.Reset()
	m.StrandedCapacity.Reset()
	for g, t := range rep.Groups {
		for _, r := range t.Total.Resources() {
			m.Capacity.WithLabelValues(g, string(r)).Set(t.Total[r])
			m.FreeCapacity.WithLabelValues(g, string(r)).Set(t.Free[r])
			m.StrandedCapacity.WithLabelValues(g, string(r)).Set(t.Stranded[r])
		}
	}
	m.RequestShapes.Set(float64(shapes))
}

// classesKey identifies the device classes' content by name and version.
func classesKey(classes []*resourceapi.DeviceClass) string {
	parts := make([]string, 0, len(classes))
	for _, c := range classes {
		parts = append(parts, c.Name+"@"+c.ResourceVersion+"@"+string(c.UID))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
