package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// registerStages adds the time each stage of a pass took, so that a slow
// pass shows which stage to look at (function_duration_seconds keeps
// upstream's function names, which cover only some stages).
func (m *Metrics) registerStages() {
	m.StageDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "dra_stage_duration_seconds",
		Help:    "Time taken by each stage of a pass of the loop (the names of the loop's stages and extensions, as explain lists them).",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"stage"})
	m.Registry.MustRegister(m.StageDuration)
}

// ObserveStage records how long a stage took.
func (m *Metrics) ObserveStage(stage string, took time.Duration) {
	m.StageDuration.WithLabelValues(stage).Observe(took.Seconds())
}
