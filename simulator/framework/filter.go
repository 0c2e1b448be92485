package framework

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// NodeResult is the scheduler's verdict for one node.
type NodeResult struct {
	Node string
	// Fits is true when every Filter plugin (and, for the node SchedulePod
	// picked, every Reserve plugin) accepted the pod.
	Fits bool
	// Plugin is the plugin that rejected the pod; empty when it fits.
	Plugin string
	// Message is the plugin's reason, as the scheduler reports it.
	Message string
	// Code is Unschedulable, UnschedulableAndUnresolvable (preemption
	// cannot help) or Error; Success when the pod fits.
	Code fwk.Code
}

// RunFilters runs PreFilter once and Filter on every named node, in
// parallel, and returns the verdicts in the order of nodeNames. The
// snapshot is left exactly as it was: simulated claims created for the pod
// are reverted. An error means the simulation itself failed (bad input, a
// plugin error in PreFilter), not that the pod does not fit.
func (r *Runner) RunFilters(ctx context.Context, pod *v1.Pod, nodeNames []string) (results []NodeResult, err error) {
	r.snap.Fork()
	defer func() {
		if rerr := r.snap.Revert(); rerr != nil && err == nil {
			err = fmt.Errorf("revert snapshot after filtering: %w", rerr)
		}
	}()
	prepared, err := r.preparePod(pod)
	if err != nil {
		return nil, fmt.Errorf("filter pod: %w", err)
	}
	return r.filter(ctx, schedframework.NewCycleState(), prepared, nodeNames)
}

// filter runs PreFilter and the parallel Filter pass with one cycle state,
// so that SchedulePod can run Reserve on it afterwards.
func (r *Runner) filter(ctx context.Context, state *schedframework.CycleState, pod *v1.Pod, nodeNames []string) (_ []NodeResult, err error) {
	return r.filterNodes(ctx, state, pod, nodeNames, nil)
}

// filterNodes is filter that also flags, in byFilter (nil: not asked),
// the verdicts the Filter plugins gave on the node itself, as opposed to
// PreFilter's for the pod.
func (r *Runner) filterNodes(ctx context.Context, state *schedframework.CycleState, pod *v1.Pod, nodeNames []string, byFilter []bool) (_ []NodeResult, err error) {
	results := make([]NodeResult, len(nodeNames))
	for i, name := range nodeNames {
		results[i].Node = name
	}
	defer recoverPlugin(pod, "", &err)
	preRes, status, pluginsWithNodes := r.fw.RunPreFilterPlugins(ctx, state, pod)
	if status.Code() == fwk.Error {
		return nil, fmt.Errorf("prefilter pod %s/%s: %w", pod.Namespace, pod.Name, status.AsError())
	}
	if !status.IsSuccess() {
		// As in the scheduler, a PreFilter rejection rejects every node.
		for i := range results {
			results[i].reject(status)
		}
		klog.FromContext(ctx).V(5).Info("PreFilter rejected pod", "pod", klog.KObj(pod), "plugin", status.Plugin(), "reason", status.Message())
		return results, nil
	}
	// Built only when needed: most cycles have no PreFilter node list.
	var filteredOut *fwk.Status
	if !preRes.AllNodes() {
		filteredOut = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node is filtered out by the prefilter result").
			WithPlugin(strings.Join(sets.List(pluginsWithNodes), ","))
	}
	check := func(i int) (err error) {
		name := nodeNames[i]
		defer recoverPlugin(pod, name, &err)
		if filteredOut != nil && !preRes.NodeNames.Has(name) {
			results[i].reject(filteredOut)
			return nil
		}
		ni, err := r.snap.Get(name)
		if err != nil {
			results[i].reject(fwk.AsStatus(err))
			return nil
		}
		st := r.fw.RunFilterPlugins(ctx, state, pod, ni)
		if byFilter != nil {
			byFilter[i] = true
		}
		if !st.IsSuccess() {
			results[i].reject(st)
			return nil
		}
		results[i].Fits, results[i].Code = true, fwk.Success
		return nil
	}
	// The first panic of a Filter call fails the whole cycle.
	var panicked atomic.Pointer[error]
	r.forEach(ctx, len(nodeNames), func(i int) {
		if err := check(i); err != nil {
			panicked.CompareAndSwap(nil, &err)
		}
	})
	if perr := panicked.Load(); perr != nil {
		return nil, *perr
	}
	// A cancelled pass stops handing out nodes: those left unchecked hold
	// no verdict, and must not read as "does not fit" (or, to verify mode,
	// as the plain framework disagreeing with a shortcut).
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filter pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return results, nil
}

// minParallelNodes is the smallest Filter pass worth spreading over
// goroutines. Waking a thread for a helper goroutine took about 60 µs on
// the 2-CPU reference machine, the time the caller needs to filter four
// nodes or so on its own: below this the helper mostly arrives when the
// work is done, and costs CPU for nothing.
const minParallelNodes = 8

// forEach runs check(i) for every i below n, the Filter pass of one cycle.
// It does what the framework's Parallelizer does for the scheduler, but
// sized for a simulator that filters a handful of nodes per cycle, many
// thousand times: small passes run inline, larger ones on at most as many
// goroutines as there are CPUs (and the configured parallelism allows),
// the caller being one of them. The Parallelizer starts up to 16 fresh
// goroutines per cycle whatever the CPUs, and each grows its stack again
// through the deep DRA allocator calls: about a tenth of an estimate's
// time went there. Each check writes only its own result, so the order in
// which they run does not matter. As in the Parallelizer, a cancelled
// context stops handing out nodes.
func (r *Runner) forEach(ctx context.Context, n int, check func(i int)) {
	workers := min(n, r.parallelism, goruntime.GOMAXPROCS(0))
	if workers <= 1 || n < minParallelNodes {
		for i := range n {
			if ctx.Err() != nil {
				return
			}
			check(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= n || ctx.Err() != nil {
				return
			}
			check(i)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

func (n *NodeResult) reject(st *fwk.Status) {
	n.Fits = false
	n.Code = st.Code()
	n.Plugin = st.Plugin()
	n.Message = st.Message()
	if n.Code == fwk.Error && st.AsError() != nil {
		n.Message = st.AsError().Error()
	}
}
