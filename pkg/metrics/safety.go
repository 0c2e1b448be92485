package metrics

import "github.com/prometheus/client_golang/prometheus"

// safetyLabels are the label values destructive_actions_refused_total
// starts with (pkg/safety's actions and rules).
var (
	safetyActions = []string{"scaleDown", "giveUp", "gangUndo", "blockDrain"}
	safetyRules   = []string{"clusterUnhealthy", "minSize", "removalBudget", "onceUsable", "notLeader"}
)

// registerSafety adds the count of destructive actions the safety gate
// refused.
func (m *Metrics) registerSafety() {
	m.SafetyRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "destructive_actions_refused_total",
		Help: "Destructive actions the safety gate refused, by action (scaleDown, giveUp, gangUndo, blockDrain) and rule (clusterUnhealthy, minSize, removalBudget, onceUsable, notLeader); each pass that asks again counts again."},
		[]string{"action", "rule"})
	m.Registry.MustRegister(m.SafetyRefusals)
	for _, a := range safetyActions {
		for _, r := range safetyRules {
			m.SafetyRefusals.WithLabelValues(a, r)
		}
	}
}

// SafetyCounter counts the gate's refusals on the metric.
type SafetyCounter struct{ m *Metrics }

// Safety is the counter the safety gate reports to.
func (m *Metrics) Safety() SafetyCounter { return SafetyCounter{m: m} }

// Inc counts one refusal.
func (c SafetyCounter) Inc(action, rule string) {
	c.m.SafetyRefusals.WithLabelValues(action, rule).Inc()
}
