package metrics

import "github.com/prometheus/client_golang/prometheus"

// ReservationMetrics describe reserved capacity: per reservation (labels
// reservation, source, kind) what it holds, what is used, what is left and
// which nodes on it sit idle, and the nodes launched by capacity type.
type ReservationMetrics struct {
	Capacity      *prometheus.GaugeVec
	Used          *prometheus.GaugeVec
	Available     *prometheus.GaugeVec
	IdleNodes     *prometheus.GaugeVec
	LaunchedNodes *prometheus.CounterVec
	Invalid       prometheus.Gauge
}

func newReservationMetrics(reg *prometheus.Registry) *ReservationMetrics {
	labels := []string{"reservation", "source", "kind"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	m := &ReservationMetrics{
		Capacity:  gauge("reservation_capacity_nodes", "Nodes a capacity reservation holds."),
		Used:      gauge("reservation_used_nodes", "Nodes on a capacity reservation, booting ones and requests in flight included."),
		Available: gauge("reservation_available_nodes", "Nodes that may still launch on a capacity reservation now."),
		IdleNodes: gauge("reservation_idle_nodes", "Registered nodes on a capacity reservation that run no workload: idle paid capacity."),
		LaunchedNodes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "launched_nodes_total",
			Help: "Nodes launched, by capacity type (reserved, on-demand, spot)."}, []string{"capacity_type"}),
		Invalid: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "invalid_capacity_reservations",
			Help: "CapacityReservation objects ignored as invalid in the last loop."}),
	}
	reg.MustRegister(m.Capacity, m.Used, m.Available, m.IdleNodes, m.LaunchedNodes, m.Invalid)
	for _, ct := range []string{"reserved", "on-demand", "spot"} {
		m.LaunchedNodes.WithLabelValues(ct)
	}
	return m
}
