package metrics

import "github.com/prometheus/client_golang/prometheus"

// registerInstances adds the metrics of giving up instances: provider
// calls that failed while the autoscaler listed or removed instances of a
// failed scale-up (each is retried with backoff).
func (m *Metrics) registerInstances() {
	m.InstanceErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "instance_errors_total",
		Help: "Cloud provider calls that failed while following scale-ups, by node group and operation (list, delete); removals are retried."},
		[]string{"node_group", "operation"})
	m.Registry.MustRegister(m.InstanceErrors)
	for _, r := range []string{"nodeNotUsable", "gangTimeout"} {
		m.FailedScaleUps.WithLabelValues(r)
	}
}
