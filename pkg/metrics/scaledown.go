package metrics

import "github.com/prometheus/client_golang/prometheus"

// ScaleDownMetrics are the scale-down metrics, upstream's names.
type ScaleDownMetrics struct {
	UnneededNodes    prometheus.Gauge
	ScaledDownNodes  *prometheus.CounterVec
	EvictedPods      prometheus.Counter
	UnremovableNodes *prometheus.GaugeVec
	FailedScaleDowns *prometheus.CounterVec
}

// Scale-down reasons of scaled_down_nodes_total.
const (
	ScaleDownEmpty         = "empty"
	ScaleDownUnderutilized = "underutilized"
)

func newScaleDown(register func(prometheus.Collector)) *ScaleDownMetrics {
	s := &ScaleDownMetrics{
		UnneededNodes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "unneeded_nodes_count",
			Help: "Number of nodes currently considered unneeded."}),
		ScaledDownNodes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "scaled_down_nodes_total",
			Help: "Number of nodes removed, by reason (empty, underutilized)."}, []string{"reason"}),
		EvictedPods: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "evicted_pods_total",
			Help: "Number of pods evicted to remove their nodes."}),
		UnremovableNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "unremovable_nodes_count",
			Help: "Number of nodes that cannot be removed, by reason."}, []string{"reason"}),
		FailedScaleDowns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "failed_scale_downs_total",
			Help: "Number of node removals that failed, by reason (drain, delete, taint)."}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{s.UnneededNodes, s.ScaledDownNodes, s.EvictedPods, s.UnremovableNodes, s.FailedScaleDowns} {
		register(c)
	}
	for _, r := range []string{ScaleDownEmpty, ScaleDownUnderutilized} {
		s.ScaledDownNodes.WithLabelValues(r)
	}
	return s
}
