package fragmentation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/snapshot/snapshottest"
)

// traceSeed and traceEvents fix the request trace of the acceptance check.
const (
	traceSeed   = 7
	traceEvents = 240
)

// event is one step of a trace: a pod arrives asking for tmpl, or the
// live pod at index victim (modulo the live count) leaves.
type event struct {
	arrive bool
	tmpl   string
	victim int
}

// genTrace makes a seeded trace of slice and whole-GPU requests on
// 7-slice GPUs: mostly arrivals of 2- and 3-slice pods, some whole-GPU
// pods, and departures, so that partly used GPUs keep appearing.
func genTrace(seed uint64, n int) []event {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]event, n)
	for i := range out {
		if i > 10 && rng.Float64() < 0.35 {
			out[i] = event{victim: rng.IntN(1 << 30)}
			continue
		}
		switch x := rng.Float64(); {
		case x < 0.45:
			out[i] = event{arrive: true, tmpl: "s2"}
		case x < 0.85:
			out[i] = event{arrive: true, tmpl: "s3"}
		default:
			out[i] = event{arrive: true, tmpl: "whole"}
		}
	}
	return out
}

// policy is how runTrace places a pod among the existing nodes.
type policy int

const (
	firstFit policy = iota
	// aware ranks every feasible node.
	aware
	// sampled ranks only the first traceSample feasible nodes, as the
	// fit-existing stage does past 100 nodes (FilterUntil, then Rank of
	// the known-feasible nodes, then SchedulePodFirstFit).
	sampled
)

// traceSample is small against the trace's ~40 nodes, so that sampling
// shows.
const traceSample = 4

// traceResult is what one placement policy made of a trace.
type traceResult struct {
	nodes        int     // nodes opened
	meanStranded float64 // stranded slices, summed over nodes, mean over events
	calls        int     // probe framework calls
}

// runTrace replays events on 1-GPU nodes of the migNode layout: each pod
// goes to an existing node where it fits (first fit in opening order, or
// the fragmentation-aware ranking), else to a new node. Every placement
// is the real framework's.
func runTrace(tb testing.TB, events []event, pol policy) traceResult {
	tb.Helper()
	r, ctx := newRunner(tb)
	load(tb, r)
	a := NewAnalyzer(r)
	sh := shapes(tb, r, "s2", "s3", "whole")
	var nodes []string
	var live []*v1.Pod
	var res traceResult
	var strandedSum float64
	for i, ev := range events {
		if !ev.arrive {
			if len(live) == 0 {
				continue
			}
			k := ev.victim % len(live)
			remove(tb, r, live[k])
			live = append(live[:k], live[k+1:]...)
		} else {
			pod := podFor(fmt.Sprintf("p%d", i), ev.tmpl)
			live = append(live, pod)
			if !schedule(tb, ctx, r, a, pod, nodes, sh, pol) {
				name := fmt.Sprintf("n%d", len(nodes))
				snapshottest.Load(tb, r.Snapshot(), migNode(name)...)
				nodes = append(nodes, name)
				if !schedule(tb, ctx, r, a, pod, []string{name}, sh, firstFit) {
					tb.Fatalf("pod %s (%s) does not fit an empty node", pod.Name, ev.tmpl)
				}
			}
		}
		for _, n := range nodes {
			rep, err := a.Node(ctx, n, sh)
			if err != nil {
				tb.Fatal(err)
			}
			strandedSum += rep.Stranded[slicesRes]
		}
	}
	res.nodes = len(nodes)
	res.meanStranded = strandedSum / float64(len(events))
	res.calls = a.Calls
	return res
}

func schedule(tb testing.TB, ctx context.Context, r *framework.Runner, a *Analyzer, pod *v1.Pod, nodes []string, sh []*Shape, pol policy) bool {
	tb.Helper()
	if len(nodes) == 0 {
		return false
	}
	candidates := nodes
	var err error
	switch pol {
	case aware:
		if candidates, _, err = a.Rank(ctx, pod, nodes, RankOptions{Shapes: sh}); err != nil {
			tb.Fatal(err)
		}
	case sampled:
		res, err := r.FilterUntil(ctx, pod, nodes, traceSample)
		if err != nil {
			tb.Fatal(err)
		}
		var feasible []string
		for _, v := range res {
			if v.Fits {
				feasible = append(feasible, v.Node)
			}
		}
		if feasible, _, err = a.Rank(ctx, pod, feasible, RankOptions{Shapes: sh, Feasible: true}); err != nil {
			tb.Fatal(err)
		}
		p, err := r.SchedulePodFirstFit(ctx, pod, append(feasible, nodes[len(res):]...))
		if err != nil {
			tb.Fatal(err)
		}
		return p.Node != ""
	}
	p, err := r.SchedulePod(ctx, pod, candidates)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Node != ""
}

// remove takes a pod and the claims made for it out of the snapshot.
func remove(tb testing.TB, r *framework.Runner, pod *v1.Pod) {
	tb.Helper()
	s := r.Snapshot()
	for _, c := range s.ClaimsOwnedBy(pod.UID) {
		if err := s.RemoveResourceClaim(c.Namespace, c.Name); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.RemovePod(pod.Namespace, pod.Name); err != nil {
		tb.Fatal(err)
	}
}

// The acceptance check: on the seeded trace, fragmentation-aware placement
// uses no more nodes than first fit and strands fewer slices.
func TestTraceAwareBeatsFirstFit(t *testing.T) {
	events := genTrace(traceSeed, traceEvents)
	ff := runTrace(t, events, firstFit)
	for _, pol := range []struct {
		name string
		p    policy
	}{{"aware", aware}, {"sampled", sampled}} {
		got := runTrace(t, events, pol.p)
		t.Logf("first-fit: %d nodes, %.2f stranded slices on average; %s: %d nodes, %.2f stranded slices (%d probe calls)",
			ff.nodes, ff.meanStranded, pol.name, got.nodes, got.meanStranded, got.calls)
		if got.nodes > ff.nodes {
			t.Errorf("%s placement used %d nodes, first fit %d", pol.name, got.nodes, ff.nodes)
		}
		if got.meanStranded >= ff.meanStranded {
			t.Errorf("%s placement stranded %.2f slices on average, first fit %.2f", pol.name, got.meanStranded, ff.meanStranded)
		}
	}
}

// BenchmarkTrace replays the seeded trace under both policies and reports
// nodes used and mean stranded slices:
//
//	go test -run '^$' -bench Trace -benchtime 1x ./simulator/fragmentation/
func BenchmarkTrace(b *testing.B) {
	events := genTrace(traceSeed, traceEvents)
	for _, tc := range []struct {
		name string
		pol  policy
	}{{"first-fit", firstFit}, {"fragmentation-aware", aware}, {fmt.Sprintf("aware-sample-%d", traceSample), sampled}} {
		b.Run(tc.name, func(b *testing.B) {
			var res traceResult
			for b.Loop() {
				res = runTrace(b, events, tc.pol)
			}
			b.ReportMetric(float64(res.nodes), "nodes")
			b.ReportMetric(res.meanStranded, "stranded-slices")
			b.ReportMetric(float64(res.calls), "probe-calls")
		})
	}
}
