package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dra-autoscaler/dra-autoscaler/simulator/shortcut"
)

// registerShadow adds the shadow check's counts: the checks made, and
// the answers a shortcut gave that the plain framework did not.
func (m *Metrics) registerShadow() {
	m.ShadowChecks = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "simulation_shadow_checks_total",
		Help: "Simulation decisions checked against the plain scheduler framework (--simulation-shadow-*), by what was checked: fitExisting, estimate, carry, placement (a gang's placement copied from one alike to it), removal (a verdict the scale-down memo kept), removalCopy (a placement scale-down's simulation copied between nodes of one key)."},
		[]string{"kind"})
	m.ShadowMismatches = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "simulation_shadow_mismatches_total",
		Help: "Simulation decisions where a shortcut answered differently from the plain scheduler framework, by shortcut (\"\" when the check could not tell which). Any non-zero value is a bug: see docs/troubleshooting.md."},
		[]string{"shortcut"})
	m.Registry.MustRegister(m.ShadowChecks, m.ShadowMismatches)
	for _, k := range []string{"fitExisting", "estimate", "carry", "placement", "removal", "removalCopy"} {
		m.ShadowChecks.WithLabelValues(k)
	}
	for _, n := range shortcut.All {
		m.ShadowMismatches.WithLabelValues(string(n))
	}
}
