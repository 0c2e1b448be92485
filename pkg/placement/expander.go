package placement

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/dra-autoscaler/dra-autoscaler/pkg/expander"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/estimator"
	"github.com/dra-autoscaler/dra-autoscaler/simulator/fragmentation"
)

// StrandedFraction scores a scale-up option for the fragmentation
// expander: the option's pods are placed again on its new nodes (in a
// fork, reverted) and the stranded part of those nodes' device capacity
// is measured against the recently seen request shapes. A failed
// simulation scores 1, the worst.
func (p *Placer) StrandedFraction(ctx context.Context, est *estimator.Estimator) func(expander.Option) float64 {
	return func(o expander.Option) (score float64) {
		logger := klog.FromContext(ctx)
		snap := p.Runner.Snapshot()
		snap.Fork()
		defer func() {
			if err := snap.Revert(); err != nil {
				logger.Error(err, "Fragmentation expander: revert")
				score = 1
			}
		}()
		res, err := est.EstimateAndKeep(ctx, o.Pods, o.Template, o.NodeGroup)
		if err != nil {
			logger.Error(err, "Fragmentation expander: estimate", "nodeGroup", o.NodeGroup)
			return 1
		}
		shapes := p.Shapes.Active(p.Now())
		total, stranded := fragmentation.Amounts{}, fragmentation.Amounts{}
		for _, n := range res.NewNodes {
			rep, err := p.Analyzer.Node(ctx, n, shapes)
			if err != nil {
				logger.Error(err, "Fragmentation expander: measure", "nodeGroup", o.NodeGroup, "node", n)
				return 1
			}
			total.Add(rep.Total)
			stranded.Add(rep.Stranded)
		}
		score = fragmentation.Fraction(stranded, total)
		logger.V(4).Info("Fragmentation expander scored option", "nodeGroup", o.NodeGroup, "nodes", len(res.NewNodes), "strandedFraction", score)
		return score
	}
}
