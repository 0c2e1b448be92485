package metrics

import "github.com/prometheus/client_golang/prometheus"

// Sharing are the metrics of shared DRA devices: per node group and
// resource ("<driver>/counter/<counter>", "<driver>/capacity/<name>",
// "<driver>/devices"), what the devices offer, what is free and what of
// the free part no recently seen request shape can use. Summed over node
// groups they are the cluster's figures.
type Sharing struct {
	Capacity         *prometheus.GaugeVec
	FreeCapacity     *prometheus.GaugeVec
	StrandedCapacity *prometheus.GaugeVec
	RequestShapes    prometheus.Gauge
	// UnrankedPlacements counts the pods a pass placed on the first node
	// that fits because --dra-placement-ranking-budget was spent.
	UnrankedPlacements prometheus.Counter
}

func (m *Metrics) registerSharing() {
	labels := []string{"node_group", "resource"}
	s := &Sharing{
		Capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "dra_capacity",
			Help: "DRA device capacity of the nodes of a node group, by resource (counter units, capacity base units, devices)."}, labels),
		FreeCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "dra_free_capacity",
			Help: "DRA device capacity not allocated, by node group and resource."}, labels),
		StrandedCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "dra_stranded_capacity",
			Help: "Free DRA device capacity that no pending or recently seen request shape can use, by node group and resource."}, labels),
		RequestShapes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "dra_request_shapes",
			Help: "Distinct DRA request shapes seen recently, which stranded capacity is judged against."}),
		UnrankedPlacements: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "dra_placement_unranked_pods_total",
			Help: "Pods placed on the first existing node that fits, without the fragmentation ranking, because the pass's ranking budget was spent."}),
	}
	m.Registry.MustRegister(s.Capacity, s.FreeCapacity, s.StrandedCapacity, s.RequestShapes, s.UnrankedPlacements)
	m.Sharing = s
}
