package metrics

import "github.com/prometheus/client_golang/prometheus"

// nominationOutcomes are the label values nomination_outcomes_total starts
// with (pkg/scaleup/nominate's outcomes).
var nominationOutcomes = []string{"followed", "ignored", "dropped"}

// registerNominations adds the count of nominations the autoscaler set
// on pods for their planned nodes, by how each ended.
func (m *Metrics) registerNominations() {
	m.NominationOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "nomination_outcomes_total",
		Help: "Nominations of pending pods for the nodes the plan placed them on (--nominate-planned-nodes), by outcome: followed (bound there), ignored (bound elsewhere, or not bound within --nomination-timeout and cleared), dropped (the pod or node went, another component nominated the pod, or the node never became usable)."},
		[]string{"outcome"})
	m.Registry.MustRegister(m.NominationOutcomes)
	for _, o := range nominationOutcomes {
		m.NominationOutcomes.WithLabelValues(o)
	}
}

// NominationCounter counts nomination outcomes on the metric.
type NominationCounter struct{ m *Metrics }

// Nominations is the counter the nominator reports to.
func (m *Metrics) Nominations() NominationCounter { return NominationCounter{m: m} }

// Inc counts one outcome.
func (c NominationCounter) Inc(outcome string) { c.m.NominationOutcomes.WithLabelValues(outcome).Inc() }
