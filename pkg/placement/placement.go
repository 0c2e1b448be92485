// Package placement decides where, among the nodes a pending pod fits,
// the planner puts it: the fragmentation-aware ranking of feasible nodes
// (simulator/fragmentation) and the policy for prioritized lists
// (--dra-prioritized-list-policy). The fit-existing stage and the
// fragmentation expander use it.
package placement

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/config"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/framework"
)

// Placer holds what placement decisions need across passes.
type Placer struct {
	Runner   *framework.Runner
	Analyzer *fragmentation.Analyzer
	Shapes   *fragmentation.Shapes
	// Aware turns the fragmentation-aware ranking on; off, pods go to
	// the first node that fits (--dra-fragmentation-aware-placement).
	Aware bool
	// Policy is a config.PrioritizedList* value.
	Policy string
	// Now is time.Now but for tests.
	Now func() time.Time
	// Budget bounds the time one pass ranks (StartPass, RankFeasible);
	// zero: no bound.
	Budget time.Duration
	// Unranked counts the pods RankFeasible left unranked for the budget.
	Unranked prometheus.Counter

	logged map[types.UID]bool // pods whose policy choice was logged
	pass   passBudget
}

// passBudget is what one pass has spent ranking.
type passBudget struct {
	spent    time.Duration
	unranked int
	// last is the pod ranked last: asked for it again (a checked
	// decision asks the plain framework's way, then the shortcuts'), it
	// is ranked again even past the budget, so both decide alike.
	last *corev1.Pod
}

// New returns a placer over runner's snapshot.
func New(runner *framework.Runner, a *fragmentation.Analyzer, shapes *fragmentation.Shapes, opts config.SharingOptions) *Placer {
	return &Placer{Runner: runner, Analyzer: a, Shapes: shapes, Aware: opts.FragmentationAwarePlacement,
		Policy: opts.PrioritizedListPolicy, Now: time.Now, Budget: opts.PlacementRankingBudget}
}

// StartPass starts a pass's ranking budget; EndPass logs what it cut.
func (p *Placer) StartPass() {
	if p != nil {
		p.pass = passBudget{}
	}
}

// EndPass logs, once per pass, how many pods the budget left unranked.
func (p *Placer) EndPass(ctx context.Context) {
	if p == nil || p.pass.unranked == 0 {
		return
	}
	klog.FromContext(ctx).V(2).Info("Placement ranking budget spent; the other pods took the first node that fits",
		"budget", p.Budget, "unranked", p.pass.unranked)
}

// RankFeasible is Rank for nodes the caller has filtered, all feasible.
// Once the pass's budget is spent it returns them as given (the first
// that fits wins) and counts the pod as unranked.
func (p *Placer) RankFeasible(ctx context.Context, pod *corev1.Pod, feasible []string) ([]string, error) {
	if p == nil || !p.Aware || len(feasible) < 2 {
		return feasible, nil
	}
	if p.Budget > 0 && p.pass.spent >= p.Budget && pod != p.pass.last {
		p.pass.unranked++
		if p.Unranked != nil {
			p.Unranked.Inc()
		}
		return feasible, nil
	}
	start := time.Now()
	defer func() { p.pass.spent += time.Since(start) }()
	p.pass.last = pod
	return p.rank(ctx, pod, feasible, true)
}

// Rank orders candidates for pod, preferred first: the fragmentation
// ranking when Aware (with the scheduler's preference for earlier
// prioritized-list alternatives first under the scheduler policy), the
// given order otherwise. On a nil Placer it returns candidates.
func (p *Placer) Rank(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, error) {
	if p == nil || !p.Aware {
		return candidates, nil
	}
	return p.rank(ctx, pod, candidates, false)
}

func (p *Placer) rank(ctx context.Context, pod *corev1.Pod, candidates []string, feasible bool) ([]string, error) {
	ranked, choices, err := p.Analyzer.Rank(ctx, pod, candidates, fragmentation.RankOptions{
		Shapes:           p.Shapes.Active(p.Now()),
		AlternativeFirst: p.Policy == config.PrioritizedListScheduler,
		Feasible:         feasible,
	})
	if err != nil {
		return nil, err
	}
	if len(choices) > 1 {
		klog.FromContext(ctx).V(4).Info("Ranked nodes by fragmentation", "pod", klog.KObj(pod), "best", choices[0], "feasible", len(choices))
	}
	return ranked, nil
}
