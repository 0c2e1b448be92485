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

	logged map[types.UID]bool // pods whose policy choice was logged
}

// New returns a placer over runner's snapshot.
func New(runner *framework.Runner, a *fragmentation.Analyzer, shapes *fragmentation.Shapes, opts config.SharingOptions) *Placer {
	return &Placer{Runner: runner, Analyzer: a, Shapes: shapes, Aware: opts.FragmentationAwarePlacement,
		Policy: opts.PrioritizedListPolicy, Now: time.Now}
}

// Rank orders candidates for pod, preferred first: the fragmentation
// ranking when Aware (with the scheduler's preference for earlier
// prioritized-list alternatives first under the scheduler policy), the
// given order otherwise. On a nil Placer it returns candidates.
func (p *Placer) Rank(ctx context.Context, pod *corev1.Pod, candidates []string) ([]string, error) {
	if p == nil || !p.Aware {
		return candidates, nil
	}
	ranked, choices, err := p.Analyzer.Rank(ctx, pod, candidates, fragmentation.RankOptions{
		Shapes:           p.Shapes.Active(p.Now()),
		AlternativeFirst: p.Policy == config.PrioritizedListScheduler,
	})
	if err != nil {
		return nil, err
	}
	if len(choices) > 1 {
		klog.FromContext(ctx).V(4).Info("Ranked nodes by fragmentation", "pod", klog.KObj(pod), "best", choices[0], "feasible", len(choices))
	}
	return ranked, nil
}
