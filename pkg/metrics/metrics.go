// Package metrics defines the autoscaler's Prometheus metrics. Names follow
// the upstream cluster autoscaler (cluster_autoscaler_*) where the concept
// is the same, so existing dashboards and alerts keep working.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "cluster_autoscaler"

// Metrics is one set of metrics on its own registry, so tests (and several
// autoscalers in one test binary) never collide.
type Metrics struct {
	Registry *prometheus.Registry

	NodesCount              *prometheus.GaugeVec
	UnschedulablePodsCount  prometheus.Gauge
	ScaledUpNodes           *prometheus.CounterVec
	FailedScaleUps          *prometheus.CounterVec
	FunctionDuration        *prometheus.HistogramVec
	LastActivity            *prometheus.GaugeVec
	Errors                  *prometheus.CounterVec
	NodeGroupMinCount       *prometheus.GaugeVec
	NodeGroupMaxCount       *prometheus.GaugeVec
	NodeGroupTargetCount    *prometheus.GaugeVec
	NodeGroupBackedOff      *prometheus.GaugeVec
	ClusterSafeToAutoscale  prometheus.Gauge
	NodeGroupsCount         prometheus.Gauge
	UnneededPodsNotHelped   *prometheus.GaugeVec
	ScaleUpOptionsEvaluated prometheus.Counter
	InstanceErrors          *prometheus.CounterVec
	NominationOutcomes      *prometheus.CounterVec
	ShadowChecks            *prometheus.CounterVec
	ShadowMismatches        *prometheus.CounterVec
	SafetyRefusals          *prometheus.CounterVec
	StageDuration           *prometheus.HistogramVec
	Sharing                 *Sharing
	ScaleDown               *ScaleDownMetrics
	ExplainMetrics
	Reservations *ReservationMetrics
}

// New registers every metric on a fresh registry.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.Registry.MustRegister(c) }
	m.NodesCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "nodes_count",
		Help: "Number of nodes in the cluster, by state (ready, unready, notStarted)."}, []string{"state"})
	m.UnschedulablePodsCount = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "unschedulable_pods_count",
		Help: "Number of unschedulable pods the autoscaler considered in its last loop."})
	m.ScaledUpNodes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "scaled_up_nodes_total",
		Help: "Number of nodes added, by node group."}, []string{"node_group"})
	m.FailedScaleUps = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "failed_scale_ups_total",
		Help: "Number of failed scale-ups, by reason (cloudProviderError, timeout, ...)."}, []string{"reason"})
	m.FunctionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "function_duration_seconds",
		Help:    "Time taken by the stages of the loop.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"function"})
	m.LastActivity = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "last_activity",
		Help: "Unix time of the last activity of each kind (main, autoscaling, scaleUp)."}, []string{"activity"})
	m.Errors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "errors_total",
		Help: "Number of errors in the loop, by type (cloudProviderError, apiCallError, simulationError, snapshotError, panic)."}, []string{"type"})
	m.NodeGroupMinCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_group_min_count",
		Help: "Minimum size of each node group."}, []string{"node_group"})
	m.NodeGroupMaxCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_group_max_count",
		Help: "Maximum size of each node group."}, []string{"node_group"})
	m.NodeGroupTargetCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_group_target_count",
		Help: "Target size of each node group."}, []string{"node_group"})
	m.NodeGroupBackedOff = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "node_group_backed_off",
		Help: "1 while a node group is backed off after a failed scale-up."}, []string{"node_group", "reason"})
	m.ClusterSafeToAutoscale = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "cluster_safe_to_autoscale",
		Help: "1 when the last loop could observe and simulate the cluster and few enough of its nodes were unready to act."})
	m.NodeGroupsCount = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "node_groups_count",
		Help: "Number of node groups the autoscaler manages."})
	m.UnneededPodsNotHelped = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "pods_not_helped_count",
		Help: "Pending pods no scale-up could help in the last loop, by reason."}, []string{"reason"})
	m.ScaleUpOptionsEvaluated = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "scale_up_options_evaluated_total",
		Help: "Node-group options estimated for scale-up."})
	for _, c := range []prometheus.Collector{m.NodesCount, m.UnschedulablePodsCount, m.ScaledUpNodes, m.FailedScaleUps,
		m.FunctionDuration, m.LastActivity, m.Errors, m.NodeGroupMinCount, m.NodeGroupMaxCount, m.NodeGroupTargetCount,
		m.NodeGroupBackedOff, m.ClusterSafeToAutoscale, m.NodeGroupsCount, m.UnneededPodsNotHelped, m.ScaleUpOptionsEvaluated,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	m.registerSharing()
	m.registerInstances()
	m.registerNominations()
	m.registerShadow()
	m.registerSafety()
	m.registerStages()
	m.ScaleDown = newScaleDown(f)
	m.registerExplain()
	m.Reservations = newReservationMetrics(m.Registry)
	// Known label values start at zero, so rates and alerts work before
	// the first failure.
	for _, r := range []string{"cloudProviderError", "outOfResources", "timeout"} {
		m.FailedScaleUps.WithLabelValues(r)
	}
	for _, e := range []string{"cloudProviderError", "apiCallError", "simulationError", "snapshotError", "panic"} {
		m.Errors.WithLabelValues(e)
	}
	return m
}

// Observe records how long a stage took since start.
func (m *Metrics) Observe(function string, start time.Time) {
	m.FunctionDuration.WithLabelValues(function).Observe(time.Since(start).Seconds())
}

// Failed counts a failed pass by the kind of its error; the cluster is
// not safe to autoscale until a pass ends well again.
func (m *Metrics) Failed(kind string) {
	m.Errors.WithLabelValues(kind).Inc()
	m.ClusterSafeToAutoscale.Set(0)
}

// Activity records that an activity happened now.
func (m *Metrics) Activity(activity string, now time.Time) {
	m.LastActivity.WithLabelValues(activity).Set(float64(now.Unix()))
}
