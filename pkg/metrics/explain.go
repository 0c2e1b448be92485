package metrics

import "github.com/prometheus/client_golang/prometheus"

// ExplainMetrics are the metrics of explanations and of scheduler
// disagreement detection (pkg/disagree).
type ExplainMetrics struct {
	// SchedulerDisagreementPods is how many pending pods the simulation
	// places on an existing ready node while the real scheduler has left
	// them unschedulable for longer than the threshold.
	SchedulerDisagreementPods prometheus.Gauge
	// SchedulerDisagreements counts pods found in disagreement, once each.
	SchedulerDisagreements prometheus.Counter
	// StatusWrites counts writes of the status ConfigMap, by result.
	StatusWrites *prometheus.CounterVec
}

func (m *Metrics) registerExplain() {
	m.SchedulerDisagreementPods = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "scheduler_disagreement_pods",
		Help: "Pending pods the simulation places on an existing node but the scheduler has left unschedulable past --scheduler-disagreement-threshold."})
	m.SchedulerDisagreements = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "scheduler_disagreements_total",
		Help: "Pods found in disagreement between the simulation and the scheduler, each counted once."})
	m.StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "status_configmap_writes_total",
		Help: "Writes of the status ConfigMap, by result (success, error)."}, []string{"result"})
	m.Registry.MustRegister(m.SchedulerDisagreementPods, m.SchedulerDisagreements, m.StatusWrites)
	m.StatusWrites.WithLabelValues("success")
	m.StatusWrites.WithLabelValues("error")
}
