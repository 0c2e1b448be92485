package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	runtimemetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/apis/autoscaling/v1alpha1"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/autoscaler"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/metrics"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/observe"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/pass"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaledown"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/fitexisting"
	"github.com/dra-autoscaler/dra-autoscaler/pkg/scaleup/plan"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
	"github.com/dra-autoscaler/dra-autoscaler/test/scale"
)

// BenchmarkLoopPass is one whole pass of the loop, wired as run wires it
// (kwok provider, default flags but for the resource totals), over a
// client-go fake clientset and informers holding generated objects (issue
// 16). Only RunOnce is timed: the clientset, the parts and the informer
// sync are built anew per iteration, since a pass launches nodes that the
// next would see as upcoming. Each pass must decide what its scenario says.
// The informer sync includes what the binary does as pods arrive (their
// PodInfos and slice facts, Loop.Warm): its time is reported as sync-s.
//
//	go test -run '^$' -bench 'LoopPass/L1' -benchtime 1x -benchmem ./cmd/dra-autoscaler/
//
// L2 and the larger L3 cases take long: pick them with -bench.
func BenchmarkLoopPass(b *testing.B) {
	b.Run("L1", func(b *testing.B) { benchPass(b, func() scale.Scenario { return scale.ScaleFromZero(4000) }) })
	b.Run("L2", func(b *testing.B) { benchPass(b, func() scale.Scenario { return scale.Busy(scale.L2) }) })
	// Issue 39: L2 whose new groups all differ, and L2 doubled.
	b.Run("L2-distinct", func(b *testing.B) { benchPass(b, func() scale.Scenario { return scale.Busy(scale.L2Distinct) }) })
	b.Run("L4", func(b *testing.B) { benchPass(b, func() scale.Scenario { return scale.Busy(scale.L4) }) })
	// L2 with one pod pinned to a GPU by uuid: every node's key holds
	// its devices' uuids for the pass (docs/performance.md).
	b.Run("L2-pinned", func(b *testing.B) {
		benchPass(b, func() scale.Scenario { l := scale.L2; l.Pinned = true; return scale.Busy(l) })
	})
	// L2 without the shadow check (its default samples cost at most 5%:
	// compare with benchstat over alternated runs, docs/performance.md).
	b.Run("L2-noshadow", func(b *testing.B) {
		passes(b, b, func() scale.Scenario { return scale.Busy(scale.L2) },
			[]string{"--simulation-shadow-fit-samples=0", "--simulation-shadow-estimate-samples=0"})
	})
	// The pass after L2's: the loop that made L2's scale-up runs again
	// while the new nodes boot, as it does every scan interval until they
	// register. Every pending pod fits (2,000 on existing nodes, the rest
	// on the upcoming ones); nothing is planned.
	b.Run("L2-next", func(b *testing.B) {
		benchPass(b, func() scale.Scenario { sc := scale.Busy(scale.L2); sc.Next = true; return sc })
	})
	// The idle pass (issue 39): L2's cluster with nothing pending, and
	// again with L2's scale-up still booting after its pods went.
	b.Run("I1", func(b *testing.B) {
		benchPass(b, func() scale.Scenario { l := scale.L2; l.Pending = 0; return scale.Busy(l) })
	})
	// The idle pass again, as it runs every scan interval: the pass after
	// an idle one.
	b.Run("I1-again", func(b *testing.B) {
		benchPass(b, func() scale.Scenario { l := scale.L2; l.Pending = 0; sc := scale.Busy(l); sc.Next = true; return sc })
	})
	b.Run("I1-booting", func(b *testing.B) {
		benchPass(b, func() scale.Scenario {
			sc := scale.Busy(scale.L2)
			sc.Next, sc.DropPending = true, true
			return sc
		})
	})
	// Upstream's RunOnceScaleDownDRA: 800 nodes, 480 removable.
	b.Run("D1", func(b *testing.B) { benchPass(b, func() scale.Scenario { return scale.ScaleDownDRA(800) }) })
	// D2: 5,000 GPU nodes after a job ended, PDBs and gangs (the gates
	// let the autoscaler read PodGroups): 2,250 removable.
	b.Run("D2", func(b *testing.B) {
		gangGates(b)
		passes(b, b, func() scale.Scenario { return scale.Consolidation(5000) }, []string{"--feature-gates=" + gangFeatureGates})
	})
	// L2 plus 200 gangs of 8 over two topology levels (CompositePodGroup
	// trees planned by the scheduler's pod group cycle).
	b.Run("G1", func(b *testing.B) {
		gangGates(b)
		passes(b, b, func() scale.Scenario { return scale.BusyGangs(scale.G1) }, []string{"--feature-gates=" + gangFeatureGates})
	})
	for _, nodes := range []int{1000, 5000} {
		for _, pending := range []int{1000, 2500, 5000, 10000} {
			l := scale.L2
			l.Nodes, l.Pending = nodes, pending
			b.Run(fmt.Sprintf("L3/nodes=%d/pending=%d", nodes, pending), func(b *testing.B) {
				benchPass(b, func() scale.Scenario { return scale.Busy(l) })
			})
		}
	}
}

// benchPass runs one pass per iteration over the scenario gen makes. The
// generated objects are made anew each time and dropped once the fake
// clientset holds them, so that the benchmark's peak RSS counts no copy
// of the cluster that a real autoscaler would not have. The fake API
// server keeps its own copy only of the pending pods and what the others
// are not (see newClient): a few thousand objects, which a real
// autoscaler does not hold.
func benchPass(b *testing.B, gen func() scale.Scenario) {
	passes(b, b, gen, nil)
}

// timer is what a pass is timed with: a benchmark's, or none.
type timer interface {
	StartTimer()
	StopTimer()
}

type untimed struct{}

func (untimed) StartTimer() {}
func (untimed) StopTimer()  {}

// passes runs one pass per iteration of b (one, without b) over the
// scenario gen makes, with the default flags plus extra.
func passes(tb testing.TB, b *testing.B, gen func() scale.Scenario, extra []string) passResult {
	// The heap before the scenario is made: what the process holds
	// anyway, which live-MB leaves out.
	empty := liveHeap()
	sc := gen()
	data, err := json.Marshal(sc.Config)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "kwok.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	// The default totals would stop a scale-up of thousands of 64-CPU
	// nodes; everything else is the default.
	args := append([]string{"--cloud-config=" + path, "--cores-total=0:100000000", "--memory-total=0:100000000"}, sc.Flags...)
	opts, err := config.Parse(append(args, extra...))
	if err != nil {
		tb.Fatal(err)
	}
	quiet(tb)
	ctx := klog.NewContext(context.Background(), klog.Background())
	var r passResult
	var t timer = untimed{}
	if b != nil {
		t = b
	}
	// A benchmark passes b.N times, a test once.
	ran := false
	more := func() bool {
		if b != nil {
			return b.Loop()
		}
		again := !ran
		ran = true
		return again
	}
	first := true
	for more() {
		t.StopTimer()
		if !first {
			r = passResult{}
			empty = liveHeap()
			sc = gen()
		}
		first = false
		mode := passMode{next: sc.Next, drop: sc.DropPending}
		r = runPass(ctx, tb, t, opts, &sc.Objects, empty, func(first *pass.State) {
			check(tb, first, sc.WantFit, sc.WantPlanned, sc.WantRemoved)
			// The pods the first pass nominated are held on their nodes,
			// not pending.
			// What the first pass planned for waits for its nodes.
			sc.WantFit = len(pass.Get(first, fitexisting.Fits))
			sc.WantPlanned = 0
			if res := pass.Get(first, plan.Result); res != nil {
				for _, up := range res.ScaleUps {
					sc.WantFit += len(up.Pods)
				}
			}
			if mode.drop {
				sc.WantFit = 0
			}
		}, mode)
		t.StartTimer()
		check(tb, r.pass, sc.WantFit-r.held, sc.WantPlanned, sc.WantRemoved)
	}
	if b == nil {
		return r
	}
	for _, s := range []string{"filterOutSchedulable", "scaleUp", "strandedCapacity"} {
		b.ReportMetric(r.functions[s], s+"-s")
	}
	// Pods the ranking budget left to first fit: placement quality the
	// pass gave up for time.
	b.ReportMetric(r.unranked, "unranked-pods")
	// What the autoscaler holds after the pass (informer caches,
	// snapshot, provider, loop): the live heap less the process's before
	// the scenario was made. The fake server holds no second copy of the
	// cluster (it serves the informers' objects, newClient and share)
	// beyond its tracker's few objects: those created or written in the
	// passes.
	b.ReportMetric(r.live, "live-MB")
	// The informers' start, OnPods' handlers included: what a restart
	// costs before its first pass.
	b.ReportMetric(r.synced, "sync-s")
	// What the pass asked of the API server (the informers' watches
	// aside): writes and reads, and of them full LISTs.
	b.ReportMetric(float64(r.requests), "api-requests")
	b.ReportMetric(float64(r.lists), "api-lists")
	// The collections that ran during the pass and the CPU they took
	// (the runtime's estimate, both cores): one cycle over a live heap
	// of a gigabyte slows the pass by more than its own CPU (write
	// barriers, sweeping on allocation).
	b.ReportMetric(r.gcCycles, "gc-cycles")
	b.ReportMetric(r.gcCPU, "gc-cpu-s")
	// On a shared machine another tenant's load stretches the wall time
	// more than the CPU time the pass gets.
	b.ReportMetric(r.cpu, "cpu-s")
	// The pass's own peak resident set, and the setup's before it: the
	// process's peak (what /usr/bin/time reports) is the larger, and the
	// setup's holds the generated cluster, the fake server's copies and
	// the informers' lists at once.
	if r.passPeak > 0 {
		b.ReportMetric(r.passPeak, "pass-peak-MB")
		b.ReportMetric(r.setupPeak, "setup-peak-MB")
	}
	logStages(b, r.stages)
	return r
}

// logStages logs the last pass's stages from the slowest, those over 10 ms.
func logStages(b *testing.B, seconds map[string]float64) {
	names := make([]string, 0, len(seconds))
	for n := range seconds {
		if seconds[n] >= 0.01 {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(i, j int) bool { return seconds[names[i]] > seconds[names[j]] })
	var sb strings.Builder
	for _, n := range names {
		fmt.Fprintf(&sb, " %s=%.2fs", n, seconds[n])
	}
	b.Logf("stages:%s", sb.String())
}

// check fails the benchmark unless pass placed fit pods on existing (or
// upcoming) nodes, planned nodes new ones and started removing removed.
func check(b testing.TB, st *pass.State, fit, nodes, removed int) {
	if fits := len(pass.Get(st, fitexisting.Fits)); fits != fit {
		b.Fatalf("%d pending pods fit existing nodes, want %d", fits, fit)
	}
	planned := 0
	if p := pass.Get(st, plan.Result); p != nil {
		for _, up := range p.ScaleUps {
			planned += up.Delta
		}
	}
	for _, o := range pass.Get(st, plan.Gangs) {
		for _, up := range o.ScaleUps {
			planned += up.Delta
		}
	}
	if planned != nodes {
		b.Fatalf("planned %d nodes, want %d (still pending: %d)", planned, nodes, len(pass.Get(st, fitexisting.Pending)))
	}
	started := 0
	if sd := pass.Get(st, scaledown.Done); sd != nil {
		started = len(sd.Started)
	}
	if started != removed {
		b.Fatalf("started removing %d nodes, want %d", started, removed)
	}
}

// passAllocs, when set, names the allocation profiles written just before
// and just after the timed pass (FILE.before, FILE.after): what the pass
// itself allocated is `go tool pprof -sample_index=alloc_space -base
// FILE.before FILE.after`. The test binary's -memprofile mixes in the
// setup, which allocates far more than a pass.
var passAllocs = flag.String("loop.allocs", "", "write the allocation profiles before and after each timed pass to `FILE`.before and FILE.after")

// writeAllocs writes the allocation profile to name.
func writeAllocs(b testing.TB, name string) {
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	err = pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
}

// passMode says which pass of a scenario is timed: the first, or (next)
// the one after it, with (drop) the pending pods deleted in between.
type passMode struct{ next, drop bool }

// passResult is what runPass saw of the timed pass.
type passResult struct {
	pass *pass.State
	// held is how many pending pods were nominated before it (held on
	// their nodes, not pending).
	held int
	// functions and stages are its seconds per upstream function and
	// per stage.
	functions, stages map[string]float64
	// unranked counts the pods it left unranked; live is the heap the
	// scenario holds after it, in MB (see live-MB); synced is the
	// informers' start, in seconds.
	unranked, live, synced float64
	// metrics are the autoscaler's.
	metrics *metrics.Metrics
	// requests counts the API requests the timed pass made, lists the
	// LISTs among them.
	requests, lists int
	// gcCycles and gcCPU are the collections during the timed pass and
	// their CPU seconds.
	gcCycles, gcCPU float64
	// cpu is the process's CPU seconds (user and system, the fake API
	// server's included) during the timed pass.
	cpu float64
	// setupPeak and passPeak are the process's peak resident set in MB
	// before the timed pass and from its start to its end, 0 where the
	// kernel cannot tell.
	setupPeak, passPeak float64
	// static counts the objects the fake server holds outside its
	// tracker, shared those it serves the informers' copy of.
	static, shared int
}

// processCPU is the process's user and system CPU seconds so far.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// gcSamples reads the collector's cycle count and CPU seconds so far.
func gcSamples() (cycles, cpu float64) {
	s := []runtimemetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	runtimemetrics.Read(s)
	return float64(s[0].Value.Uint64()), s[1].Value.Float64()
}

// runPass builds a fresh cluster and loop, syncs the informers and runs
// one pass with the timer on; with mode.next, an untimed pass first,
// which first is given (the timed one is the pass after it, with what the
// first kept; with mode.drop, without the pending pods). It empties *objs
// once the fake clientset has them.
func runPass(ctx context.Context, b testing.TB, t timer, opts *config.Options, objs *[]runtime.Object, empty uint64, first func(*pass.State),
	mode passMode) (r passResult) {
	client := newClient(*objs)
	*objs = nil
	provider, err := newProvider(opts, client, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = provider.Cleanup() }()
	m := metrics.New()
	// The fake discovery does not serve the CapacityReservation CRD: its
	// informer does not start, as in a cluster without it. NodeGroup
	// objects are listed and written as in a cluster with their CRD.
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.NodeGroupResource: "NodeGroupList"})
	l, err := autoscaler.New(ctx, opts, autoscaler.Env{Client: client, Dynamic: dyn, Provider: provider, Recorder: &record.FakeRecorder{}, Metrics: m})
	if err != nil {
		b.Fatal(err)
	}
	informers, stop := context.WithCancel(ctx)
	// The informers stop only once their context is done.
	defer func() { stop(); l.Shutdown() }()
	start := time.Now()
	if err := l.Start(informers); err != nil {
		b.Fatal(err)
	}
	r.synced = time.Since(start).Seconds()
	state, err := l.Observer().Observe()
	if err != nil {
		b.Fatal(err)
	}
	r.shared, r.static = client.share(state)
	if mode.next {
		st, err := l.RunOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		first(st)
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		// seen waits until the informers hold at most pending pending
		// pods, held of them nominated.
		seen := func(pending int) {
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				state, err := l.Observer().Observe()
				if err != nil {
					return false, err
				}
				nominated, left := 0, 0
				for _, p := range state.Pods {
					if p.Spec.NodeName == "" {
						left++
						if p.Status.NominatedNodeName != "" {
							nominated++
						}
					}
				}
				return left <= pending && (mode.drop || nominated == r.held), nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		var pending []corev1.Pod
		for _, p := range pods.Items {
			switch {
			case p.Spec.NodeName != "":
			case mode.drop:
				pending = append(pending, p)
			case p.Status.NominatedNodeName != "":
				r.held++
			}
		}
		// Deleted in batches the fake watch's channel holds (100
		// events; a pod served outside the tracker sends two, newClient),
		// each seen by the informers before the next.
		for i, p := range pending {
			if err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
			if (i+1)%25 == 0 {
				seen(len(pending) - i - 1)
			}
		}
		// The informers see the nominations (or deletions) before the
		// timed pass.
		seen(len(pods.Items))
		if mode.drop {
			seen(0)
		}
	}
	// The timed pass's share of the metrics is what they gain in it.
	f0, s0, u0 := stageSeconds(b, m)
	// The setup's garbage (the fake clientset's copies above all) is the
	// benchmark's: collected before the pass, not during it.
	goruntime.GC()
	if *passAllocs != "" {
		writeAllocs(b, *passAllocs+".before")
	}
	before := len(client.Actions())
	cycles0, cpu0 := gcSamples()
	proc0 := processCPU()
	r.setupPeak = peakRSS()
	peakKnown := resetPeakRSS()
	t.StartTimer()
	// Labelled so that a profile can keep the timed pass alone
	// (`go tool pprof -tagfocus pass=timed`): setup and the untimed
	// pass before it would otherwise mix in.
	var st *pass.State
	pprof.Do(ctx, pprof.Labels("pass", "timed"), func(ctx context.Context) { st, err = l.RunOnce(ctx) })
	t.StopTimer()
	cycles1, cpu1 := gcSamples()
	r.cpu = processCPU() - proc0
	if *passAllocs != "" {
		// The profile counts allocations up to the last collection.
		goruntime.GC()
		writeAllocs(b, *passAllocs+".after")
	}
	r.gcCycles, r.gcCPU = cycles1-cycles0, cpu1-cpu0
	if peakKnown {
		r.passPeak = peakRSS()
	}
	for _, a := range client.Actions()[before:] {
		switch a.GetVerb() {
		case "watch":
			continue // an informer's, restarted: not the pass's
		case "list":
			r.lists++
		}
		r.requests++
	}
	if err != nil {
		b.Fatal(err)
	}
	r.pass, r.live, r.metrics = st, (float64(liveHeap())-float64(empty))/1e6, m
	goruntime.KeepAlive(l)
	var unranked float64
	r.functions, r.stages, unranked = stageSeconds(b, m)
	for k := range r.functions {
		r.functions[k] -= f0[k]
	}
	for k := range r.stages {
		r.stages[k] -= s0[k]
	}
	r.unranked = unranked - u0
	return r
}

// newClient is a fake clientset holding objs. The ResourceSlices,
// ResourceClaims, nodes and pods, most of a GPU cluster's bytes, are
// served from objs themselves rather than from the tracker's deep copy:
// the informers' copies share their content, as the only copy a real
// autoscaler holds is its informers' (and once they have synced, from the
// informers' objects themselves: share). A pending pod moves into the
// tracker when it is first written (the loop nominates it, a benchmark
// deletes it); objects created later (kwok makes nodes and publishes
// their slices) live in the tracker. The tracker's objects are listed
// with the others.
//
// The tracker is the plain one, without field management: the autoscaler
// never applies server-side, and the field-managed tracker builds a REST
// mapper on every write, a fake API server's CPU (a tenth of the pass at
// L2) that no real autoscaler spends.
func newClient(objs []runtime.Object) *fakeServer {
	srv := &fakeServer{static: map[string][]runtime.Object{"pods": nil}, pending: map[types.NamespacedName]*corev1.Pod{}}
	var rest []runtime.Object
	gangs := false
	for _, o := range objs {
		switch p := o.(type) {
		case *resourceapi.ResourceSlice:
			srv.static["resourceslices"] = append(srv.static["resourceslices"], o)
		case *resourceapi.ResourceClaim:
			srv.static["resourceclaims"] = append(srv.static["resourceclaims"], o)
		case *corev1.Node:
			srv.static["nodes"] = append(srv.static["nodes"], o)
		case *corev1.Pod:
			if p.Spec.NodeName == "" {
				srv.pending[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
				continue
			}
			srv.static["pods"] = append(srv.static["pods"], o)
		case *schedulingv1beta1.PodGroup:
			gangs = true
			rest = append(rest, o)
		default:
			rest = append(rest, o)
		}
	}
	client := fake.NewSimpleClientset(rest...)
	srv.Clientset = client
	if gangs {
		// The fake discovery serves what the gang scenarios create, so
		// their informers start, as in a cluster with the gates on.
		client.Resources = []*metav1.APIResourceList{
			{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"},
				{Name: "workloads", Namespaced: true, Kind: "Workload"}}},
			{GroupVersion: "scheduling.k8s.io/v1alpha3", APIResources: []metav1.APIResource{{Name: "compositepodgroups", Namespaced: true, Kind: "CompositePodGroup"}}},
		}
	}
	// A pending pod the loop writes (its nomination) moves into the
	// tracker with the write done: the write is made on a tracker of its
	// own (the fake's own patch and update code), and the result added with
	// one event, as many as the tracker's own write would send (the fake
	// watch's channel holds 100). A pod the benchmark deletes is added and
	// then deleted: two events (its batches are sized for that).
	client.PrependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		var name string
		switch a := a.(type) {
		case clienttesting.PatchAction:
			name = a.GetName()
		case clienttesting.UpdateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case clienttesting.DeleteAction:
			name = a.GetName()
		default:
			return false, nil, nil
		}
		pod := srv.takePending(a.GetNamespace(), name)
		if pod == nil {
			return false, nil, nil
		}
		if _, ok := a.(clienttesting.DeleteAction); ok {
			return false, nil, client.Tracker().Add(pod)
		}
		own := clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
		if err := own.Add(pod); err != nil {
			srv.putPending(pod)
			return true, nil, err
		}
		_, written, err := clienttesting.ObjectReaction(own)(a)
		if err != nil {
			srv.putPending(pod)
			return true, nil, err
		}
		return true, written, client.Tracker().Add(written)
	})
	for resource := range srv.static {
		client.PrependReactor("list", resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
			list := a.(clienttesting.ListActionImpl)
			tracked, err := client.Tracker().List(list.GetResource(), list.GetKind(), list.GetNamespace(), list.ListOptions)
			if err != nil {
				return true, nil, err
			}
			items, err := meta.ExtractList(tracked)
			if err != nil {
				return true, nil, err
			}
			srv.mu.Lock()
			objs := srv.static[resource]
			if resource == "pods" {
				objs = slices.Clip(objs)
				for _, p := range srv.pending {
					objs = append(objs, p)
				}
			}
			srv.mu.Unlock()
			all := make([]runtime.Object, 0, len(objs)+len(items))
			for _, o := range objs {
				if ns := list.GetNamespace(); ns == "" || o.(metav1.Object).GetNamespace() == ns {
					all = append(all, o)
				}
			}
			// SetList copies each object shallowly: the content is
			// shared, and never modified.
			return true, tracked, meta.SetList(tracked, append(all, items...))
		})
	}
	return srv
}

// fakeServer is the fake API server: the clientset, and the objects it
// serves from outside the tracker (newClient).
type fakeServer struct {
	*fake.Clientset
	mu     sync.Mutex
	static map[string][]runtime.Object
	// pending are the pending pods served outside the tracker, by
	// namespace/name, until a write moves one into it.
	pending map[types.NamespacedName]*corev1.Pod
}

// takePending removes the pending pod ns/name from the objects served
// outside the tracker and returns it; nil when it is not one of them.
func (s *fakeServer) takePending(ns, name string) *corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := types.NamespacedName{Namespace: ns, Name: name}
	p := s.pending[k]
	delete(s.pending, k)
	return p
}

// putPending serves pod outside the tracker again (a write that failed).
func (s *fakeServer) putPending(pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = pod
}

// share has the server serve, in place of each object it holds outside
// the tracker, the informers' copy of it. The informers copy what they
// list shallowly (client-go's reflector), so until then the process held
// two top-level structs of every node, slice, claim and running pod
// where a real autoscaler holds one: 40 MB at L2-distinct, 80 MB at L4,
// which the collector marked and RSS counted. An object the informers do
// not hold is kept. It returns how many objects it swapped, of how many.
func (s *fakeServer) share(state *observe.ClusterState) (shared, total int) {
	held := map[string]map[string]runtime.Object{"nodes": {}, "pods": {}, "resourceslices": {}, "resourceclaims": {}}
	add := func(resource string, o metav1.Object) {
		held[resource][o.GetNamespace()+"/"+o.GetName()] = o.(runtime.Object)
	}
	for _, o := range state.Nodes {
		add("nodes", o)
	}
	for _, o := range state.Pods {
		add("pods", o)
	}
	for _, o := range state.ResourceSlices {
		add("resourceslices", o)
	}
	for _, o := range state.ResourceClaims {
		add("resourceclaims", o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for resource, objs := range s.static {
		served := make([]runtime.Object, len(objs))
		for i, o := range objs {
			m := o.(metav1.Object)
			served[i] = o
			if h, ok := held[resource][m.GetNamespace()+"/"+m.GetName()]; ok && h.(metav1.Object).GetUID() == m.GetUID() {
				served[i] = h
				shared++
			}
		}
		s.static[resource] = served
		total += len(objs)
	}
	for k, p := range s.pending {
		if h, ok := held["pods"][k.String()]; ok && h.(metav1.Object).GetUID() == p.UID {
			s.pending[k] = h.(*corev1.Pod)
			shared++
		}
		total++
	}
	return shared, total
}

// gangFeatureGates are the gates gang scenarios run with, as a cluster
// whose scheduler plans CompositePodGroups has them.
const gangFeatureGates = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true"

// gangGates turns the gang gates off again when tb ends: gates are the
// process's, and the other scenarios run without them.
func gangGates(tb testing.TB) {
	tb.Cleanup(func() {
		if err := framework.ApplyFeatureGates("CompositePodGroup=false,TopologyAwareWorkloadScheduling=false,GenericWorkload=false"); err != nil {
			tb.Error(err)
		}
	})
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// resetPeakRSS makes the kernel's peak resident set of this process
// (VmHWM) start again from the current one (Linux's clear_refs, value 5);
// false where it cannot.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM in MB (10^6 bytes), 0 when unreadable.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err == nil {
				return kb * 1024 / 1e6
			}
		}
	}
	return 0
}

// stageSeconds reads the time the pass recorded per upstream function and
// per stage, and how many pods it placed unranked.
func stageSeconds(b testing.TB, m *metrics.Metrics) (map[string]float64, map[string]float64, float64) {
	families, err := m.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out, stages := map[string]float64{}, map[string]float64{}
	var unranked float64
	for _, f := range families {
		if f.GetName() == "cluster_autoscaler_dra_placement_unranked_pods_total" && len(f.GetMetric()) == 1 {
			unranked = f.GetMetric()[0].GetCounter().GetValue()
		}
		into := map[string]map[string]float64{"cluster_autoscaler_function_duration_seconds": out,
			"cluster_autoscaler_dra_stage_duration_seconds": stages}[f.GetName()]
		if into == nil {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "function" || lp.GetName() == "stage" {
					into[lp.GetValue()] = s.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return out, stages, unranked
}

// quiet sends klog nowhere: a pass logs per pod.
func quiet(b testing.TB) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	if err := fs.Set("logtostderr", "false"); err != nil {
		b.Fatal(err)
	}
	klog.SetOutput(io.Discard)
}
